// How a rank of a job ended, in a record made for the launcher rather than in log lines (as
// torchelastic's workers leave an error file for their agent): finished at step (or chunk) N,
// stopped on request at N, failed in N and why, or timed out waiting for a peer. The launcher names
// a folder in TANDEM_STATE_DIR and reads it after the job; each rank writes rank-<R>.json there
// once, atomically, as it ends. Without the variable (mpirun or srun started the ranks directly)
// nothing is written.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/jobs/job_unit.h"

namespace tandem::jobs {

inline constexpr const char* kRankStateDirVariable = "TANDEM_STATE_DIR";

struct RankState {
  // kTimedOut: a collective did not complete in time and the rank's watchdog ended it: the failure
  // is most likely a peer's (dead, stuck, or its host lost), not this rank's.
  enum class Outcome { kFinished, kStopped, kFailed, kTimedOut };
  int rank = 0;
  std::string host;
  Outcome outcome = Outcome::kFailed;
  // Where the rank was, in the job's unit (jobs/job_unit.h). kFinished, kStopped: the steps
  // trained, the chunks done. kFailed: the step or chunk it failed in; -1 before the work began.
  // kTimedOut: -1 (a watchdog cannot say).
  int64_t at = -1;
  int exit_code = 0;  // what the rank exits with (or its MPI_Abort code)
  int signal = 0;     // kStopped: the stop signal that asked (jobs/stop_signals.h); else 0
  std::string error;  // kFailed, kTimedOut: the error, one line
  double time = 0;    // when it ended, in seconds since the Unix epoch: which rank failed first
};

// "finished", "stopped", "failed" or "timed_out": the record's "outcome".
const char* outcome_name(RankState::Outcome outcome);

// The record's JSON text, and back; std::invalid_argument naming `source` for text that is not one.
std::string to_json(const RankState& state);
RankState rank_state_from_json(const std::string& text, const std::string& source);

// Every rank's record in `dir` (rank-<R>.json), in rank order; none when `dir` is missing. A file
// that is not a record is left out with a warning naming it.
std::vector<RankState> read_rank_states(const std::string& dir);

// This process's record: where and as whom it is written, set once the rank knows its number;
// then end() writes it, once. The watchdog's thread and the main thread may both end a rank: the
// first end() is the record.
namespace rank_state {

// Reads TANDEM_STATE_DIR; nothing is recorded without it.
void open(int rank, const std::string& host);
// Writes the record (time: now), unless one was written already; returns whether it wrote one.
// Never throws: a record that cannot be written is a warning, and the launcher falls back on
// mpirun's report.
bool end(RankState::Outcome outcome, int64_t at, int exit_code, int signal = 0,
         const std::string& error = "") noexcept;

}  // namespace rank_state
}  // namespace tandem::jobs
