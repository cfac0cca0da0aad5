// One entry point for every tool that runs as ranks (tandem-train, tandem-decode's and
// tandem-score's file jobs), as torchelastic's @record wraps a worker's: the rank's state record
// for the launcher (jobs/rank_state.h) is written on every way out (finished, stopped on
// request, failed, timed out waiting for a peer), and a failure ends the whole job, so that no rank
// is left waiting for another.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "trainer/jobs/job_unit.h"

namespace tandem::jobs {

// Who a rank is in its job, and how it ends every rank of the job (the process group's abort:
// MPI_Abort), as run_rank needs them.
struct RankSeat {
  int rank = 0;
  int size = 1;
  std::string host;
  std::function<void(int exit_code)> abort_job;
};

// How a rank's work ended when it returned.
struct RankEnd {
  int exit_code = 0;
  int64_t at = 0;       // how far it got, in the job's unit: the steps trained, the chunks done
  int stop_signal = 0;  // the stop signal that ended it early (jobs/stop_signals.h); 0: none
};

// Runs `work` as this process's rank `seat`, in a job counted in `unit`, and records how it
// ended: finished or stopped as RankEnd says; failed on an exception, logged as "failed in step
// N: what" (N: what the work left in `at`, the step or chunk it was in; -1, before it began, names
// none); timed out on a PeerTimeout. A failure ends every rank of the job (seat.abort_job) when
// there are others; a timeout always. Returns the process's exit code.
int run_rank(const RankSeat& seat, JobUnit unit, const std::function<RankEnd(int64_t& at)>& work);

}  // namespace tandem::jobs
