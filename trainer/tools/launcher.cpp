#include "trainer/tools/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <stdexcept>

#include "trainer/common/signal_sender.h"
#include "trainer/common/terminal.h"
#include "trainer/tools/process.h"

namespace tandem::tools {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

// Signals reach run_job's loop through a pipe: a handler may run on any thread (OpenBLAS starts
// its own), and writing the signal and its sender (one write, under PIPE_BUF: never split) is
// all it does.
int g_signal_pipe[2] = {-1, -1};

struct SignalNote {
  int sig = 0;
  pid_t sender = 0;  // signal_sender
};

void forward_to_pipe(int sig, siginfo_t* info, void* /*context*/) {
  const int saved = errno;
  const SignalNote note{sig, signal_sender(info)};
  if (write(g_signal_pipe[1], &note, sizeof note) < 0) {
    // A full pipe already holds enough signals to act on.
  }
  errno = saved;
}

void forward_signals_to_pipe() {
  struct sigaction action {};
  action.sa_sigaction = forward_to_pipe;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (int sig : kStopSignals) sigaction(sig, &action, nullptr);
  sigaction(SIGCHLD, &action, nullptr);
}

void restore_default_handlers() {
  for (int sig : kStopSignals) signal(sig, SIG_DFL);
  signal(SIGCHLD, SIG_DFL);
}

// The child: its own process group, no terminal input, standard error into `err`, default signal
// dispositions (an ignored SIGPIPE would survive exec), then mpirun.
[[noreturn]] void exec_job(const std::vector<std::string>& argv, int err) {
  setpgid(0, 0);
  const int null = open("/dev/null", O_RDONLY);
  if (null >= 0) dup2(null, STDIN_FILENO);
  dup2(err, STDERR_FILENO);
  signal(SIGPIPE, SIG_DFL);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

// What a stop signal does, by how many came so far from the first one's sender (others are the
// same stop arriving by another path: run_job does not count them): ask the ranks to save
// (SIGUSR2, which mpirun forwards to every rank at once; they then exit 0, so mpirun ends
// normally), then to stop at once (their handlers exit on a second signal from mpirun), then kill
// mpirun's process group outright.
void pass_on_stop(int sig, int count, pid_t job, const std::string& tool) {
  const char* name = signal_name(sig);
  if (count == 1) {
    std::fprintf(stderr,
                 "%s: %s: every rank finishes its step and saves a checkpoint; the same again "
                 "from the same sender stops at once\n",
                 tool.c_str(), name);
    kill(job, SIGUSR2);
  } else if (count == 2) {
    std::fprintf(stderr, "%s: %s again: stopping at once (saved checkpoints stay intact)\n",
                 tool.c_str(), name);
    kill(job, SIGUSR2);
  } else {
    kill(-job, SIGKILL);
    kill(job, SIGKILL);
  }
  std::fflush(stderr);
}

std::string mpirun_path() {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw std::runtime_error(
        "mpirun not found on PATH (needed for more than one rank; install "
        "openmpi-bin)");
  }
  return mpirun;
}

// "-x NAME" for each of `names` set here, and Open MPI's root variables when run as root (set in
// this process's environment, which mpirun inherits).
void forward_variables(std::vector<std::string> names, std::vector<std::string>& argv) {
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    names.insert(names.end(), {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"});
  }
  for (const auto& name : names) {
    if (std::getenv(name.c_str()) != nullptr) argv.insert(argv.end(), {"-x", name});
  }
}

int exit_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
  }
  return "a signal";
}

int stop_grace_s() {
  const char* text = std::getenv("TANDEM_STOP_GRACE");
  if (text == nullptr || *text == '\0') return kStopGraceS;
  char* end = nullptr;
  const long seconds = std::strtol(text, &end, 10);
  if (*end != '\0' || seconds < 1 || seconds > 86400) {
    throw std::invalid_argument(std::string("TANDEM_STOP_GRACE='") + text +
                                "': expected whole seconds from 1 to 86400");
  }
  return static_cast<int>(seconds);
}

MpirunCommand mpirun_command(int ranks, int threads, const std::vector<std::string>& forward_env,
                             int grace_s) {
  MpirunCommand command;
  command.argv = {mpirun_path(), "--oversubscribe", "-np", std::to_string(ranks)};
  const int cores = usable_cores();
  const std::string fit = std::to_string(ranks) + " rank(s) x " + std::to_string(threads) +
                          " thread(s) and " + std::to_string(cores) + " usable core(s)";
  if (ranks * threads <= cores) {
    // One core per thread, so a rank's threads never share a core with another rank's.
    command.binding = threads == 1
                          ? "--bind-to core"
                          : "--map-by slot:PE=" + std::to_string(threads) + " --bind-to core";
    command.why = fit + ": ranks pinned";
  } else {
    command.binding = "--bind-to none";
    command.why = fit + ": more threads than cores, ranks left unpinned";
  }
  for (size_t begin = 0, end; begin < command.binding.size(); begin = end + 1) {
    end = command.binding.find(' ', begin);
    if (end == std::string::npos) end = command.binding.size();
    command.argv.push_back(command.binding.substr(begin, end - begin));
  }
  command.argv.insert(command.argv.end(),
                      {"--mca", "odls_base_sigkill_timeout", std::to_string(grace_s)});
  forward_variables(forward_env, command.argv);
  return command;
}

const std::vector<std::string> kHostsEnvironment = {"PATH",
                                                    "LD_LIBRARY_PATH",
                                                    "OPAL_PREFIX",
                                                    "NCCL_DEBUG",
                                                    "NCCL_SOCKET_IFNAME",
                                                    "NCCL_IB_DISABLE",
                                                    "NCCL_P2P_DISABLE",
                                                    "CUDA_VISIBLE_DEVICES",
                                                    "TANDEM_FAULT_INJECT"};

MpirunCommand mpirun_hosts_command(const std::string& hostfile, int ranks,
                                   const std::vector<std::string>& forward_env, int grace_s) {
  MpirunCommand command;
  command.argv = {mpirun_path(),
                  "--hostfile",
                  hostfile,
                  "-np",
                  std::to_string(ranks),
                  "--map-by",
                  "slot",
                  "--bind-to",
                  "none",
                  "--mca",
                  "odls_base_sigkill_timeout",
                  std::to_string(grace_s)};
  command.binding = "--map-by slot --bind-to none";
  command.why = "one rank per slot of " + hostfile;
  if (const char* iface = std::getenv("TANDEM_IFACE"); iface != nullptr && *iface != '\0') {
    command.argv.insert(command.argv.end(),
                        {"--mca", "btl_tcp_if_include", iface, "--mca", "oob_tcp_if_include", iface,
                         "-x", std::string("NCCL_SOCKET_IFNAME=") + iface});
  }
  std::vector<std::string> forward = kHostsEnvironment;
  forward.insert(forward.end(), forward_env.begin(), forward_env.end());
  forward_variables(forward, command.argv);
  return command;
}

// SLURM sets SLURM_PROCID in a batch script too (0): only a task of a job step that srun started
// with several tasks is a rank. The batch script, salloc's shell and a one-task step (srun -n 1
// tandem-train --ranks 4) start the ranks themselves. (Seen with SLURM 22.05: the batch script
// has SLURM_PROCID and no SLURM_STEP_ID; srun's tasks have both, and SLURM_STEP_NUM_TASKS.)
bool started_as_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* step = std::getenv("SLURM_STEP_ID");
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  return step != nullptr && tasks != nullptr && std::atoi(tasks) > 1;
}

int auto_ranks(int gpus, int threads) {
  if (gpus > 0) return gpus;
  return std::max(1, usable_cores() / std::max(1, threads));
}

// mpirun's standard error on its way through: written on as it comes, its lines kept.
class ErrorRelay {
 public:
  explicit ErrorRelay(int fd) : fd_(fd) {}
  // Passes on what can be read now; false once the pipe has no writer left.
  bool pass_on() {
    char buffer[65536];
    for (;;) {
      const ssize_t n = read(fd_, buffer, sizeof buffer);
      if (n > 0) {
        write_all(buffer, static_cast<size_t>(n));
        keep_lines(buffer, static_cast<size_t>(n));
      } else if (n == 0) {
        return false;
      } else {
        return errno == EAGAIN || errno == EINTR;
      }
    }
  }
  std::vector<std::string> lines() {
    if (!partial_.empty()) push(std::move(partial_));
    return {lines_.begin(), lines_.end()};
  }
  // Whether mpirun has said that the job failed and is being torn down.
  bool job_failed() const { return job_failed_; }

 private:
  static void write_all(const char* data, size_t size) {
    while (size > 0) {
      const ssize_t n = write(STDERR_FILENO, data, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // our own stderr is gone: the lines are still kept
      data += n;
      size -= static_cast<size_t>(n);
    }
  }
  void keep_lines(const char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      if (data[i] == '\n') {
        push(std::move(partial_));
        partial_.clear();
      } else if (partial_.size() < 4096) {
        partial_ += data[i];
      }
    }
  }
  void push(std::string line) {
    for (const char* notice : kTeardownNotices) {
      if (line.find(notice) != std::string::npos) job_failed_ = true;
    }
    if (lines_.size() == kKeptLines) lines_.pop_front();
    lines_.push_back(std::move(line));
  }
  // What Open MPI 4.1's mpirun prints when it tears a job down after a failure.
  static constexpr const char* kTeardownNotices[] = {
      "Primary job  terminated normally, but", "MPI_ABORT was invoked on rank",
      "mpirun noticed that process rank", "has lost communication with a remote daemon"};
  int fd_;
  std::string partial_;
  std::deque<std::string> lines_;
  bool job_failed_ = false;
};

using Clock = std::chrono::steady_clock;
constexpr Clock::time_point kNoDeadline = Clock::time_point::max();

// Milliseconds until `deadline` for poll(): -1 (no limit) for kNoDeadline, 0 when it passed.
int poll_timeout_ms(Clock::time_point deadline) {
  if (deadline == kNoDeadline) return -1;
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

JobResult run_job(const std::vector<std::string>& argv, const std::string& tool) {
  int err[2];
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  }
  // The ranks' output reaches our terminal, if any, through us: they ask it for its width.
  const char* terminal = isatty(STDERR_FILENO) ? ttyname(STDERR_FILENO) : nullptr;
  terminal != nullptr ? setenv(log::kTerminalVariable, terminal, 1)
                      : unsetenv(log::kTerminalVariable);
  forward_signals_to_pipe();
  signal(SIGPIPE, SIG_IGN);  // a closed stderr of ours must not end the launcher mid-job
  std::fflush(nullptr);      // or the child would write our buffered output a second time
  const pid_t job = fork();
  if (job < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (job == 0) exec_job(argv, err[1]);
  close(err[1]);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  setpgid(job, job);  // also here, so no signal is sent before the child has its group
  ErrorRelay relay(err[0]);
  bool relaying = true;
  int stops = 0, status = 0;
  pid_t first_sender = 0;
  JobResult result;
  Clock::time_point teardown_deadline = kNoDeadline;
  while (waitpid(job, &status, WNOHANG) == 0) {
    pollfd wake[2] = {{g_signal_pipe[0], POLLIN, 0}, {relaying ? err[0] : -1, POLLIN, 0}};
    const int ready = poll(wake, 2, poll_timeout_ms(teardown_deadline));
    if (ready < 0 && errno != EINTR) break;
    if (ready == 0 && teardown_deadline != kNoDeadline) {  // mpirun is stuck tearing the job down
      std::fprintf(stderr, "%s: mpirun has not ended %d s after the job failed; ending it\n",
                   tool.c_str(), kTeardownS + 2 * stop_grace_s());
      kill(-job, SIGKILL);
      teardown_deadline = kNoDeadline;
      continue;
    }
    if (relaying && wake[1].revents != 0) relaying = relay.pass_on();
    if (relay.job_failed() && teardown_deadline == kNoDeadline && stops == 0) {
      teardown_deadline = Clock::now() + std::chrono::seconds(kTeardownS + 2 * stop_grace_s());
    }
    SignalNote note;
    while (read(g_signal_pipe[0], &note, sizeof note) == sizeof note) {
      if (note.sig == SIGCHLD) continue;
      if (stops == 0) {
        result.stop_signal = note.sig;
        result.stop_time = std::filesystem::file_time_type::clock::now();
        first_sender = note.sender;
      } else if (note.sender != first_sender) {
        std::fprintf(stderr, "%s: %s from another process (pid %d): the stop under way covers it\n",
                     tool.c_str(), signal_name(note.sig), static_cast<int>(note.sender));
        continue;
      }
      pass_on_stop(note.sig, ++stops, job, tool);
    }
  }
  if (relaying) relay.pass_on();  // what mpirun wrote before it exited
  kill(-job, SIGKILL);            // ranks or daemons mpirun left behind, if any
  restore_default_handlers();
  signal(SIGPIPE, SIG_DFL);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  close(err[0]);
  result.status = exit_status(status);
  result.last_lines = relay.lines();
  return result;
}

std::string unsafe_stop_hint() {
  if (std::getenv("OMPI_MCA_orte_hnp_uri") == nullptr) return "";  // not Open MPI's mpirun
  const char* grace = std::getenv("OMPI_MCA_odls_base_sigkill_timeout");
  if (grace != nullptr && std::atof(grace) >= kStopGraceS) return "";
  return "mpirun gives the ranks " + std::string(grace != nullptr ? grace : "1") +
         " s between SIGTERM and SIGKILL, so a SIGTERM or Ctrl-C to mpirun loses the steps since "
         "the last checkpoint. HINT: start with `tandem-train --ranks N` instead, or add `--mca "
         "odls_base_sigkill_timeout " +
         std::to_string(kStopGraceS) + "` to mpirun, or stop with `kill -USR1 <mpirun pid>`";
}

}  // namespace tandem::tools
