#include "trainer/train/stop_signal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <initializer_list>

namespace tandem::train {
namespace {
std::atomic<int> g_signal{0};

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

// Once stopping, a log line that cannot be written at once is dropped rather than waited for:
// the step and the checkpoint come first. (A terminal or a file is left as it is: nobody stops
// reading those, and a terminal's flags are shared with the shell.)
void on_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) _exit(128 + sig);
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
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaction(sig, &action, nullptr);
}

int stop_signal() { return g_signal.load(); }

int stopped_exit_status(int sig) { return sig == 0 || sig == SIGUSR2 ? 0 : 128 + sig; }

static_assert(kLauncherStopSignal == SIGUSR2, "the launcher's stop signal is SIGUSR2");

}  // namespace tandem::train
