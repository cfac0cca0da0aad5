#include "trainer/jobs/process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <utility>

namespace tandem::jobs {

namespace fs = std::filesystem;

std::vector<std::string> environment_with(const std::vector<std::string>& added,
                                          const std::vector<std::string>& removed) {
  const auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry(*e), name = name_of(entry);
    const bool replaced = std::any_of(added.begin(), added.end(),
                                      [&](const std::string& a) { return name_of(a) == name; });
    if (!replaced && std::find(removed.begin(), removed.end(), name) == removed.end()) {
      out.push_back(entry);
    }
  }
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

ExecArgs::ExecArgs(std::vector<std::string> argv, std::vector<std::string> environment)
    : argv_(std::move(argv)), environment_(std::move(environment)) {
  for (auto& arg : argv_) args_.push_back(arg.data());
  args_.push_back(nullptr);
  for (auto& entry : environment_) envp_.push_back(entry.data());
  envp_.push_back(nullptr);
}

void ExecArgs::exec() const {
  execvpe(args_[0], args_.data(), envp_.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args_[0], std::strerror(errno));
  _exit(127);
}

int run_process(const std::vector<std::string>& argv, const std::string& stdout_path,
                const std::vector<std::string>& environment) {
  const ExecArgs command(argv, environment_with(environment));
  std::fflush(nullptr);  // or the child would write our buffered output a second time
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (!stdout_path.empty()) {
      const int fd = open(stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0) _exit(127);
      close(fd);
    }
    command.exec();
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR)
      throw std::runtime_error(std::string("waitpid failed: ") + std::strerror(errno));
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    const std::string dir = end > begin ? dirs.substr(begin, end - begin) : ".";
    const std::string candidate = dir + "/" + program;
    if (access(candidate.c_str(), X_OK) == 0 && !fs::is_directory(candidate)) return candidate;
    begin = end + 1;
  }
  return "";
}

std::string self_executable() { return fs::read_symlink("/proc/self/exe").string(); }

int usable_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) != 0) return 1;
  // Hyperthreads share a core: count (package, core) pairs, as mpirun's --bind-to core does.
  std::set<std::pair<std::string, std::string>> cores;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    std::string package = "?", core = std::to_string(cpu);
    std::ifstream(topology + "physical_package_id") >> package;
    std::ifstream(topology + "core_id") >> core;
    cores.emplace(package, core);
  }
  return cores.empty() ? 1 : static_cast<int>(cores.size());
}

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("socket failed: ") + std::strerror(errno));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;  // the kernel picks a free one
  socklen_t size = sizeof address;
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&address), size) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0;
  close(fd);
  if (!ok) throw std::runtime_error(std::string("no free local port: ") + std::strerror(errno));
  return ntohs(address.sin_port);
}

double peak_rss_mb() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // Linux reports KiB
}

}  // namespace tandem::jobs
