// Who sent a signal: how stop handlers tell one person asking twice from one stop that reaches a
// process by several paths (a scheduler signals every process of a job, and the script, the
// launcher and mpirun each pass the stop on).
#pragma once

#include <signal.h>
#include <sys/types.h>

namespace tandem::jobs {

// The sending process for a signal sent with kill() or sigqueue() (a shell's kill, scancel's
// slurmstepd, a launcher, mpirun); 0 for one the kernel raised (a terminal's Ctrl-C).
inline pid_t signal_sender(const siginfo_t* info) {
  if (info == nullptr) return 0;
  const bool sent =
      info->si_code == SI_USER || info->si_code == SI_QUEUE || info->si_code == SI_TKILL;
  return sent ? info->si_pid : 0;
}

}  // namespace tandem::jobs
