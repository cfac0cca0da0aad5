#include "trainer/jobs/job_failure.h"

#include <climits>
#include <regex>

#include "trainer/common/whole_number.h"
#include "trainer/jobs/stop_signals.h"

namespace tandem::jobs {
namespace {

// What mpirun prints (Open MPI 4.1), one pattern each.
const std::regex kNoticedSignal(
    R"(mpirun noticed that process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
const std::regex kAbort(
    R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+))");
const std::regex kExitCode(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code: +(-?\d+))");
const std::regex kNonZero(R"(Primary job  terminated normally, but \d+ process(?:es)? returned)");
const std::regex kLostDaemon(R"(Remote daemon: \[\[\d+,\d+\],\d+\] on node (\S+))");

// A number mpirun printed (a rank, an exit code); -1 for one out of an int's range.
int number(const std::ssub_match& digits) {
  const auto value = parse_whole_number(digits.str());
  return value && *value >= INT_MIN && *value <= INT_MAX ? static_cast<int>(*value) : -1;
}

// An exit code with which a rank says it stopped because it was asked to (jobs/stop_handler.h):
// 128 plus the stop signal that asked.
bool stopped_on_request(int code) { return code > 128 && is_stop_signal(code - 128); }

void take_exit_code(JobFailure& failure, int code, const std::string& what) {
  failure.how = what + std::to_string(code);
  failure.kind = code == 2                  ? FailureKind::kUsage
                 : stopped_on_request(code) ? FailureKind::kStopped
                                            : FailureKind::kFailed;
}

// The record of the rank that failed: that of `rank` (the one mpirun named) when it failed or timed
// out, else the first to fail on its own; nullptr when none did. A rank that timed out waiting for
// a peer names no failure of its own: the peer's, or a host's, is the failure.
const RankState* failed_record(const std::vector<RankState>& ranks, int rank) {
  using Outcome = RankState::Outcome;
  const RankState* first = nullptr;
  for (const RankState& state : ranks) {
    if (state.outcome != Outcome::kFailed && state.outcome != Outcome::kTimedOut) continue;
    if (state.rank == rank) return &state;
    if (state.outcome != Outcome::kFailed) continue;
    if (first == nullptr || state.time < first->time) first = &state;
  }
  return first;
}

// What the ranks' records add to mpirun's account: a stop they were asked for, and the failed
// rank's step and error (and who it is, when mpirun named nobody).
// A rank killed by a signal, or a host lost, is no stop on request, whatever the others did.
void take_records(JobFailure& failure, const std::vector<RankState>& ranks, bool killed) {
  for (const RankState& state : ranks) {
    if (state.outcome == RankState::Outcome::kStopped && !killed) {
      failure.kind = FailureKind::kStopped;
    }
  }
  const RankState* failed = failed_record(ranks, failure.rank);
  if (failed == nullptr) return;
  if (failure.rank < 0) failure.rank = failed->rank;
  if (failure.rank == failed->rank && failure.host.empty()) failure.host = failed->host;
  failure.at = failed->at;
  failure.message = failed->error;
  if (failure.kind == FailureKind::kFailed && !killed && failed->exit_code == 2) {
    failure.kind = FailureKind::kUsage;
  }
}

}  // namespace

bool job_finished(const std::vector<RankState>& ranks) {
  for (const RankState& state : ranks) {
    if (state.rank == 0) return state.outcome == RankState::Outcome::kFinished;
  }
  return false;
}

JobFailure parse_job_failure(const std::vector<std::string>& lines, int status,
                             const std::vector<RankState>& ranks) {
  std::string text;
  for (const auto& line : lines) text += line + '\n';
  JobFailure failure;
  std::smatch m;
  if (std::regex_search(text, m, kExitCode)) {
    failure.rank = number(m[1]);
    take_exit_code(failure, number(m[2]), "exited with code ");
  }
  bool killed = false;
  if (std::regex_search(text, m, kNoticedSignal)) {
    failure.rank = number(m[1]);
    failure.host = m[2].str();
    failure.how = "killed by signal " + m[3].str() + (m[4].matched ? " (" + m[4].str() + ")" : "");
    failure.kind = FailureKind::kFailed;
    killed = true;
  }
  if (std::regex_search(text, m, kAbort)) {
    failure.rank = number(m[1]);
    take_exit_code(failure, number(m[2]), "called MPI_Abort with error code ");
    if (failure.kind == FailureKind::kStopped) {
      failure.kind = FailureKind::kFailed;  // a rank that stops on request exits; it does not abort
    }
    killed = false;
  }
  if (std::regex_search(text, m, kLostDaemon)) {
    failure.kind = FailureKind::kUnreachable;
    killed = true;
    failure.host = m[1].str();
    failure.how = "host unreachable (mpirun lost contact with its daemon)";
  }
  if (failure.how.empty() && std::regex_search(text, m, kNonZero)) {
    failure.how = "exited with a non-zero code";  // mpirun did not get as far as saying which
  }
  if (failure.how.empty() && status == 0) {
    failure.how = "mpirun exited with status 0 before rank 0 said the job finished";
  } else if (failure.how.empty()) {
    take_exit_code(failure, status, "mpirun exited with status ");
  }
  take_records(failure, ranks, killed);
  return failure;
}

std::string describe(const JobFailure& failure, JobUnit unit) {
  std::string text;
  if (failure.kind == FailureKind::kUnreachable) {
    text = "host " + failure.host;
  } else if (failure.rank >= 0) {
    text = "rank " + std::to_string(failure.rank);
    if (!failure.host.empty()) text += " on " + failure.host;
  } else {
    text = "the job";
  }
  text += ": " + failure.how;
  if (failure.at >= 0) {
    text += std::string(" in ") + unit_name(unit) + " " + std::to_string(failure.at);
  }
  if (!failure.message.empty()) text += " (" + failure.message + ")";
  return text;
}

bool same_failure(const JobFailure& before, const JobFailure& again) {
  // A rank that names its step names its error too; mpirun's notices are not always intact (Open
  // MPI 4.1.4 garbles its MPI_ABORT notice now and then), so they decide only without one.
  if (before.at >= 0 || again.at >= 0) {
    return before.at == again.at && before.message == again.message;
  }
  const auto unreachable = [](const JobFailure& f) { return f.kind == FailureKind::kUnreachable; };
  return before.how == again.how && unreachable(before) == unreachable(again) &&
         before.host == again.host;
}

int failure_exit_code(int status) { return status != 0 ? status : 1; }

}  // namespace tandem::jobs
