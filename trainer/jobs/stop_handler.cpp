#include "trainer/jobs/stop_handler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>

#include "trainer/jobs/signal_sender.h"

namespace tandem::jobs {
namespace {
// The first stop signal and who sent it (signal_sender), set together: a repeat can land on
// another thread while the first handler runs. 0: none yet.
std::atomic<uint64_t> g_first{0};

uint64_t first_stop(int sig, pid_t sender) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(sender)) << 32) | static_cast<uint32_t>(sig);
}

// stdout and stderr when they are pipes or sockets, else -1. Under mpirun they lead to mpirun,
// which (Open MPI 4.1) on SIGTERM or Ctrl-C sends the ranks SIGCONT at once, SIGTERM one grace
// later and SIGKILL one grace after that, reading none of their output meanwhile: a rank that
// logs more than a pipe holds (64 KB) in that time blocks writing, and would act on its SIGTERM
// no sooner than its SIGKILL. Seen with steps of ~0.5 ms logged every step: the job died 2 s
// after the signal, at step 486, without a checkpoint.
int g_pipes[2] = {-1, -1};

bool pipe_or_socket(int fd) {
  struct stat info {};
  return fstat(fd, &info) == 0 && (S_ISFIFO(info.st_mode) || S_ISSOCK(info.st_mode));
}

// A repeat from whoever sent the first stop signal (Ctrl-C twice, kill twice from one shell,
// scancel twice) exits at once. A stop signal from another process is the same stop reaching this
// one by another path, and the step and its checkpoint go on: one scancel is a SIGTERM from SLURM
// to every process of the job, then the batch script, the launcher and mpirun pass it on.
// Once stopping, a log line that cannot be written at once is dropped rather than waited for:
// the step and the checkpoint come first. (A terminal or a file is left as it is: nobody stops
// reading those, and a terminal's flags are shared with the shell.)
void on_signal(int sig, siginfo_t* info, void* /*context*/) {
  const pid_t sender = signal_sender(info);
  uint64_t first = 0;
  if (!g_first.compare_exchange_strong(first, first_stop(sig, sender))) {
    if (static_cast<pid_t>(first >> 32) == sender) _exit(128 + sig);
    return;
  }
  for (int fd : g_pipes) {
    const int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
    if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
  }
}
}  // namespace

void install_stop_signal_handlers() {
  g_pipes[0] = pipe_or_socket(STDOUT_FILENO) ? STDOUT_FILENO : -1;
  g_pipes[1] = pipe_or_socket(STDERR_FILENO) ? STDERR_FILENO : -1;
  struct sigaction action {};
  action.sa_sigaction = on_signal;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  for (const int sig : kStopSignals) sigaction(sig, &action, nullptr);
  sigaction(kLauncherStopSignal, &action, nullptr);
}

int stop_signal() { return static_cast<int>(g_first.load() & 0xffffffffu); }

int stopped_exit_status(int sig) { return sig == 0 || sig == kLauncherStopSignal ? 0 : 128 + sig; }

}  // namespace tandem::jobs
