// Stop signals in a job's ranks (training, chunked translation): the first one finishes the step
// or the chunk in hand, saves and exits; a second from the same sender exits at once. SIGUSR2 is
// the launcher's request.
#pragma once

#include "trainer/jobs/stop_signals.h"

namespace tandem::jobs {

// Handling of the stop signals (jobs/stop_signals.h: kStopSignals and the launcher's
// kLauncherStopSignal) in a rank: the first signal asks its loop to finish
// its step and checkpoint (or its chunk) and exit; a second one from the same sender (Ctrl-C
// twice, scancel twice) exits at once (checkpoints and parts are written atomically, so nothing
// already written is corrupted),
// and one from another process is the same stop arriving by another path: it changes nothing.
// kLauncherStopSignal is the launcher's request (tandem-train and tandem-decode --ranks,
// launch/train-hosts.sh): the ranks exit 0 and the launcher reports the stop, since mpirun treats a
// rank's non-zero status as a failure to clean up after.

void install_stop_signal_handlers();
// 0 while no signal arrived, else the first signal's number.
int stop_signal();
// The exit status of a run that stop signal `sig` ended: 128 + sig; 0 for the launcher's
// (kLauncherStopSignal) and for none (0).
int stopped_exit_status(int sig);

}  // namespace tandem::jobs
