#include "trainer/jobs/job_supervisor.h"

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
#include <stdexcept>

#include "trainer/common/terminal.h"
#include "trainer/jobs/job_environment.h"
#include "trainer/jobs/process.h"
#include "trainer/jobs/signal_sender.h"
#include "trainer/jobs/stop_signals.h"

namespace tandem::jobs {
namespace {

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
[[noreturn]] void exec_job(const ExecArgs& command, int err) {
  setpgid(0, 0);
  const int null = open("/dev/null", O_RDONLY);
  if (null >= 0) dup2(null, STDIN_FILENO);
  dup2(err, STDERR_FILENO);
  signal(SIGPIPE, SIG_DFL);
  command.exec();
}

// What a stop signal does, by how many came so far from the first one's sender (others are the
// same stop arriving by another path: run_job does not count them): ask the ranks to save
// (kLauncherStopSignal, which mpirun forwards to every rank at once; they then exit 0, so mpirun
// ends normally), then to stop at once (their handlers exit on a second signal from mpirun), then
// kill mpirun's process group outright.
void pass_on_stop(int sig, int count, pid_t job, const std::string& tool, const StopWords& words) {
  const char* name = signal_name(sig);
  if (count == 1) {
    std::fprintf(stderr, "%s: %s: %s; the same again from the same sender stops at once\n",
                 tool.c_str(), name, words.first.c_str());
    kill(job, kLauncherStopSignal);
  } else if (count == 2) {
    std::fprintf(stderr, "%s: %s again: stopping at once (%s stay intact)\n", tool.c_str(), name,
                 words.kept.c_str());
    kill(job, kLauncherStopSignal);
  } else {
    kill(-job, SIGKILL);
    kill(job, SIGKILL);
  }
  std::fflush(stderr);
}

int exit_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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

// mpirun's environment: this process's, `environment`'s entries, and the terminal our standard
// error is, if any (the ranks' output reaches it through us: they ask it for its width).
std::vector<std::string> job_environment(std::vector<std::string> environment) {
  const char* terminal = isatty(STDERR_FILENO) ? ttyname(STDERR_FILENO) : nullptr;
  if (terminal == nullptr) return environment_with(environment, {log::kTerminalVariable});
  environment.push_back(std::string(log::kTerminalVariable) + "=" + terminal);
  return environment_with(environment);
}

// Starts `argv` with `environment` as a child in a process group of its own, its standard error
// into `err`, after the signal pipe and handlers are in place; returns its pid.
pid_t start_job(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                int err[2]) {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0 || pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  }
  const ExecArgs command(argv, job_environment(environment));
  forward_signals_to_pipe();
  signal(SIGPIPE, SIG_IGN);  // a closed stderr of ours must not end the launcher mid-job
  std::fflush(nullptr);      // or the child would write our buffered output a second time
  const pid_t job = fork();
  if (job < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (job == 0) exec_job(command, err[1]);
  close(err[1]);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  setpgid(job, job);  // also here, so no signal is sent before the child has its group
  return job;
}

// The stop signals that came so far, counted from the first one's sender.
struct Stops {
  int count = 0;
  pid_t first_sender = 0;
};

// Acts on the stop signals waiting in the pipe (pass_on_stop); the first is `result`'s.
void take_stop_signals(pid_t job, const std::string& tool, const StopWords& words, Stops& stops,
                       JobResult& result) {
  SignalNote note;
  while (read(g_signal_pipe[0], &note, sizeof note) == sizeof note) {
    if (note.sig == SIGCHLD) continue;
    if (stops.count == 0) {
      result.stop_signal = note.sig;
      stops.first_sender = note.sender;
    } else if (note.sender != stops.first_sender) {
      std::fprintf(stderr, "%s: %s from another process (pid %d): the stop under way covers it\n",
                   tool.c_str(), signal_name(note.sig), static_cast<int>(note.sender));
      continue;
    }
    pass_on_stop(note.sig, ++stops.count, job, tool, words);
  }
}

}  // namespace

JobResult run_job(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                  const std::string& tool, const StopWords& words) {
  int err[2];
  const pid_t job = start_job(argv, environment, err);
  ErrorRelay relay(err[0]);
  bool relaying = true;
  int status = 0;
  Stops stops;
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
    if (relay.job_failed() && teardown_deadline == kNoDeadline && stops.count == 0) {
      teardown_deadline = Clock::now() + std::chrono::seconds(kTeardownS + 2 * stop_grace_s());
    }
    take_stop_signals(job, tool, words, stops, result);
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

}  // namespace tandem::jobs
