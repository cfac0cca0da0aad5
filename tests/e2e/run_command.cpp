#include "tests/e2e/run_command.h"

#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tandem::test {
namespace {

// (state, parent pid) from /proc/<pid>/stat, or nothing when the process is gone. The command
// name in parentheses may itself hold spaces and parentheses, so parse after the last ')'.
std::optional<std::pair<char, int>> proc_state(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return std::nullopt;
  std::istringstream rest(stat.substr(stat.rfind(')') + 1));
  char state = '?';
  int parent = 0;
  rest >> state >> parent;
  return std::make_pair(state, parent);
}

// Whether process `pid` is gone, or a zombie with no thread left but its leader: all its threads
// have then closed their files.
bool exited(int pid) {
  const auto state = proc_state(pid);
  if (!state) return true;
  if (state->first != 'Z') return false;
  std::error_code error;
  int threads = 0;
  for (auto it = std::filesystem::directory_iterator(
           "/proc/" + std::to_string(pid) + "/task", error);
       !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
    ++threads;
  }
  return threads <= 1;
}

// `root` and all its descendants (Open MPI puts each rank in a process group of its own, so the
// command's process group alone would miss them).
std::vector<int> process_tree(int root) {
  std::multimap<int, int> children;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    if (const auto state = proc_state(std::stoi(name))) children.emplace(state->second, std::stoi(name));
  }
  std::vector<int> tree = {root};
  for (size_t i = 0; i < tree.size(); ++i) {
    const auto range = children.equal_range(tree[i]);
    for (auto it = range.first; it != range.second; ++it) tree.push_back(it->second);
  }
  return tree;
}

// The MPI world rank in process `pid`'s initial environment, or -1 if it holds none.
int mpi_rank_in_environment(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/environ");
  for (std::string entry; std::getline(in, entry, '\0');) {
    for (const std::string key : {"OMPI_COMM_WORLD_RANK=", "PMI_RANK="}) {
      if (entry.compare(0, key.size(), key) == 0) return std::stoi(entry.substr(key.size()));
    }
  }
  return -1;
}

}  // namespace

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

BackgroundCommand::BackgroundCommand(const std::string& command) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);  // its own process group, so the destructor can end everything it started
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  fd_ = fds[0];
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) {
    kill_all();
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

void BackgroundCommand::signal(int sig) {
  if (pid_ > 0) kill(pid_, sig);
}

void BackgroundCommand::kill_all() {
  if (pid_ <= 0) return;
  const std::vector<int> tree = process_tree(pid_);
  for (int pid : tree) kill(pid, SIGSTOP);
  kill(-pid_, SIGKILL);
  for (int pid : tree) kill(pid, SIGKILL);
  // kill() only queues the signal; a process is harmless once it is gone, or a zombie whose
  // threads have all exited (a zombie leader's threads can still be closing its files, and with
  // them a checkpoint directory's lock). Those that are not our children cannot be waited for,
  // hence the polling (the kernel needs microseconds to milliseconds).
  for (int pid : tree) {
    while (!exited(pid)) sched_yield();
  }
}

int BackgroundCommand::rank_pid(int rank) const {
  if (pid_ <= 0) return -1;
  for (int pid : process_tree(pid_)) {
    if (pid != pid_ && mpi_rank_in_environment(pid) == rank) return pid;
  }
  return -1;
}

bool wait_until_ended(int pid, std::chrono::steady_clock::time_point deadline) {
  // A pidfd turns readable when its process ends, whether or not it is our child.
  const int fd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) {
    if (errno == ESRCH) return true;  // gone (reaped) already
    throw std::runtime_error("pidfd_open(" + std::to_string(pid) + "): " + std::strerror(errno));
  }
  pollfd ready{fd, POLLIN, 0};
  int status;
  do {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    status = poll(&ready, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
  } while (status < 0 && errno == EINTR);
  close(fd);
  return status > 0;
}

bool BackgroundCommand::wait_for_line(const std::string& text) {
  std::array<char, 4096> buffer{};
  for (;;) {
    for (size_t end; (end = output_.find('\n', scanned_)) != std::string::npos; scanned_ = end + 1) {
      if (output_.substr(scanned_, end - scanned_).find(text) != std::string::npos) {
        scanned_ = end + 1;
        return true;
      }
    }
    const ssize_t n = read(fd_, buffer.data(), buffer.size());
    if (n <= 0) return false;
    output_.append(buffer.data(), static_cast<size_t>(n));
  }
}

bool BackgroundCommand::wait_until(const std::function<bool()>& done) {
  std::array<char, 4096> buffer{};
  for (;;) {
    if (done()) return true;
    pollfd readable{fd_, POLLIN, 0};
    const int ready = poll(&readable, 1, 50);
    if (ready < 0 && errno != EINTR) return done();
    if (ready <= 0) continue;
    const ssize_t n = read(fd_, buffer.data(), buffer.size());
    if (n <= 0) return done();
    output_.append(buffer.data(), static_cast<size_t>(n));
  }
}

int BackgroundCommand::wait() {
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = read(fd_, buffer.data(), buffer.size())) > 0;) {
    output_.append(buffer.data(), static_cast<size_t>(n));
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

nlohmann::json last_json_line(const std::string& output) {
  const auto lines = lines_of(output);
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (!it->empty() && it->front() == '{') return nlohmann::json::parse(*it);
  }
  throw std::runtime_error("no JSON line in:\n" + output);
}

std::vector<nlohmann::json> metrics_records(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);) {
    if (in.eof()) break;  // no newline yet: still being written
    auto record = nlohmann::json::parse(line, nullptr, false);
    if (!record.is_discarded()) records.push_back(std::move(record));
  }
  return records;
}

std::vector<nlohmann::json> training_records(const std::string& path) {
  std::vector<nlohmann::json> records = metrics_records(path);
  records.erase(std::remove_if(records.begin(), records.end(),
                               [](const nlohmann::json& r) { return r.contains("event"); }),
                records.end());
  return records;
}

bool reached_step(const std::string& path, int64_t step) {
  const auto records = training_records(path);
  return std::any_of(records.begin(), records.end(), [step](const nlohmann::json& r) {
    return r.value("step", int64_t{0}) >= step;
  });
}

std::string tool(const std::string& name) { return std::string(TANDEM_TOOLS_DIR) + "/" + name; }

std::string mpirun(int ranks) {
  return std::string(TANDEM_MPIEXEC) +
         " --oversubscribe --bind-to none -np " + std::to_string(ranks) +
         " -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 ";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

}  // namespace tandem::test
