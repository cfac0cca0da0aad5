// The signals that ask a Tandem job to stop with a save, in one list for the ranks' handlers, the
// launcher's and the reading of how a job ended: a rank that stops on one of them saves its last
// step and exits 128 + that signal; the launcher passes any of them on as kLauncherStopSignal.
#pragma once

#include <signal.h>

namespace tandem::jobs {

// SIGTERM (kill, scancel, a scheduler's time limit), SIGINT (Ctrl-C), SIGHUP (the terminal went
// away) and SIGUSR1 (`kill -USR1` to mpirun, which passes it to every rank, as SLURM's --signal
// does before a time limit).
inline constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};

// The launcher's request to its ranks (mpirun passes SIGUSR2 on to every rank): finish the step,
// save and exit 0, so that mpirun ends normally and the launcher reports the stop.
inline constexpr int kLauncherStopSignal = SIGUSR2;

inline bool is_stop_signal(int sig) {
  for (const int stop : kStopSignals) {
    if (sig == stop) return true;
  }
  return false;
}

// "SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1" or "SIGUSR2"; "a signal" for another.
inline const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
  }
  return "a signal";
}

}  // namespace tandem::jobs
