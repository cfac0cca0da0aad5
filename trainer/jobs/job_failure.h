// How an mpirun job ended, from what is made to say it: the ranks' state records
// (jobs/rank_state.h: finished, stopped, or failed in step or chunk N and why), mpirun's exit
// status, and mpirun's own notices of which rank or host it lost and how. The ranks' log lines are
// not read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/jobs/job_unit.h"
#include "trainer/jobs/rank_state.h"

namespace tandem::jobs {

// A job's failure as far as the records and mpirun tell. Open MPI 4.x names the first process that
// failed ("mpirun noticed that process rank R ... on node H exited on signal S", "Process name:
// [[J,1],R] / Exit code: C", "MPI_ABORT was invoked on rank R ... with errorcode C", "lost
// communication with a remote daemon ... on node H"); a rank that failed on its own says in its
// record in which step (or chunk) and why.
enum class FailureKind {
  kFailed,       // a rank failed, or was killed: a restart may mend it
  kUsage,        // exit code 2: bad input, which a restart does not mend
  kStopped,      // the ranks stopped on request (a stop signal, jobs/stop_signals.h)
  kUnreachable,  // a host stopped answering mpirun
};

struct JobFailure {
  FailureKind kind = FailureKind::kFailed;
  int rank = -1;        // the rank that failed first; -1 when nothing named one
  std::string host;     // its host, or the host that became unreachable; "" when not named
  std::string how;      // "killed by signal 9 (Killed)", "exited with code 3", ...
  int64_t at = -1;      // the step (or chunk) the rank said it failed in; -1: it could not say
  std::string message;  // the rank's error, from its record
};

// Whether the job finished: rank 0's record says so. It writes it once every rank has left the
// training loop and the last checkpoint is saved. mpirun's exit status alone does not say the job
// finished: under SLURM, Open MPI 4.1's mpirun exits 0, saying nothing, when SLURM ends the step of
// its daemon on a node that failed (seen with SLURM 22.05 and --no-kill), and the ranks left are
// killed mid-step.
bool job_finished(const std::vector<RankState>& ranks);

// The failure of a job whose mpirun exited with `status` (non-zero, or 0 without job_finished):
// `ranks` are the ranks' records, `lines` mpirun's standard error. A failed rank's record gives
// where it failed and why: that of the rank mpirun names, else the first to fail on its own (not a
// rank that timed out waiting for a peer). What neither says comes from the status.
JobFailure parse_job_failure(const std::vector<std::string>& lines, int status,
                             const std::vector<RankState>& ranks);

// One phrase for a log line: "rank 1 on node07: killed by signal 9 (Killed) in step 37", in the
// job's unit.
std::string describe(const JobFailure& failure, JobUnit unit = JobUnit::kStep);

// Whether `again` is the same failure as `before` come back: the same error in the same place when
// a rank named them; otherwise the same way of failing (the caller adds whether training got any
// further in between).
bool same_failure(const JobFailure& before, const JobFailure& again);

// The exit code that `failure` ends the launcher with: mpirun's `status`, or 1 where that is 0.
int failure_exit_code(int status);

}  // namespace tandem::jobs
