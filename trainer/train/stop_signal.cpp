#include "trainer/train/stop_signal.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <initializer_list>

namespace tandem::train {
namespace {
std::atomic<int> g_signal{0};

void on_signal(int sig) {
  int expected = 0;
  if (!g_signal.compare_exchange_strong(expected, sig)) _exit(128 + sig);
}
}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) sigaction(sig, &action, nullptr);
}

int stop_signal() { return g_signal.load(); }

int stopped_exit_status(int sig) { return sig == 0 || sig == SIGUSR2 ? 0 : 128 + sig; }

static_assert(kLauncherStopSignal == SIGUSR2, "the launcher's stop signal is SIGUSR2");

}  // namespace tandem::train
