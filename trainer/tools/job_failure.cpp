#include "trainer/tools/job_failure.h"

#include <csignal>
#include <regex>

namespace tandem::tools {
namespace {

// What mpirun prints (Open MPI 4.1) and what a Tandem rank prints, one pattern each.
const std::regex kNoticedSignal(
    R"(mpirun noticed that process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)(?: \(([^)]*)\))?)");
const std::regex kAbort(
    R"(MPI_ABORT was invoked on rank (\d+) in communicator \S+\s+with errorcode (-?\d+))");
const std::regex kExitCode(R"(Process name: \[\[\d+,\d+\],(\d+)\]\s+Exit code: +(-?\d+))");
const std::regex kNonZero(R"(Primary job  terminated normally, but \d+ process(?:es)? returned)");
const std::regex kLostDaemon(R"(Remote daemon: \[\[\d+,\d+\],\d+\] on node (\S+))");
const std::regex kRankFailed(R"(\[rank (\d+)\] error: failed in step (\d+): ([^\n]*))");
const std::regex kRankError(R"(\[rank (\d+)\] error: ([^\n]*))");

// An exit code with which a rank says it stopped because it was asked to (stop_signal.h): 128 plus
// the signal that asked.
bool stopped_on_request(int code) {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGUSR1}) {
    if (code == 128 + sig) return true;
  }
  return false;
}

void take_exit_code(JobFailure& failure, int code, const std::string& what) {
  failure.how = what + std::to_string(code);
  failure.usage_error = code == 2;
  failure.stopped = stopped_on_request(code);
}

}  // namespace

bool ranks_finished(const std::vector<std::string>& lines) {
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    if (it->find("[tandem] finished at step ") != std::string::npos) return true;
  }
  return false;
}

JobFailure parse_job_failure(const std::vector<std::string>& lines, int status) {
  std::string text;
  for (const auto& line : lines) text += line + '\n';
  JobFailure failure;
  std::smatch m;
  if (std::regex_search(text, m, kExitCode)) {
    failure.rank = std::stoi(m[1].str());
    take_exit_code(failure, std::stoi(m[2].str()), "exited with code ");
  }
  if (std::regex_search(text, m, kNoticedSignal)) {
    failure.rank = std::stoi(m[1].str());
    failure.host = m[2].str();
    failure.how = "killed by signal " + m[3].str() + (m[4].matched ? " (" + m[4].str() + ")" : "");
    failure.usage_error = failure.stopped = false;
  }
  if (std::regex_search(text, m, kAbort)) {
    failure.rank = std::stoi(m[1].str());
    take_exit_code(failure, std::stoi(m[2].str()), "called MPI_Abort with error code ");
    failure.stopped = false;  // a rank that stops on request exits; it does not abort
  }
  if (std::regex_search(text, m, kRankFailed)) {
    failure.rank = std::stoi(m[1].str());
    failure.step = std::stoll(m[2].str());
    failure.message = m[3].str();
  } else {
    // The failed rank's own error line (e.g. its watchdog's), not another rank's about it.
    for (auto it = std::sregex_iterator(text.begin(), text.end(), kRankError);
         it != std::sregex_iterator(); ++it) {
      const int rank = std::stoi((*it)[1].str());
      if (failure.rank >= 0 && rank != failure.rank) continue;
      failure.rank = rank;
      failure.message = (*it)[2].str();
      break;
    }
  }
  if (std::regex_search(text, m, kLostDaemon)) {
    failure.unreachable = true;
    failure.host = m[1].str();
    failure.how = "host unreachable (mpirun lost contact with its daemon)";
    failure.usage_error = failure.stopped = false;
  }
  if (failure.how.empty() && std::regex_search(text, m, kNonZero)) {
    failure.how = "exited with a non-zero code";  // mpirun did not get as far as saying which
  }
  if (failure.how.empty() && status == 0) {
    failure.how = "mpirun exited with status 0 before rank 0 said training finished";
  } else if (failure.how.empty()) {
    take_exit_code(failure, status, "mpirun exited with status ");
  }
  return failure;
}

std::string describe(const JobFailure& failure) {
  std::string text;
  if (failure.unreachable) {
    text = "host " + failure.host;
  } else if (failure.rank >= 0) {
    text = "rank " + std::to_string(failure.rank);
    if (!failure.host.empty()) text += " on " + failure.host;
  } else {
    text = "the job";
  }
  text += ": " + failure.how;
  if (failure.step >= 0) text += " in step " + std::to_string(failure.step);
  if (!failure.message.empty()) text += " (" + failure.message + ")";
  return text;
}

bool same_failure(const JobFailure& before, const JobFailure& again) {
  // A rank that names its step names its error too; mpirun's notices are not always intact (Open
  // MPI 4.1.4 garbles its MPI_ABORT notice now and then), so they decide only without one.
  if (before.step >= 0 || again.step >= 0) {
    return before.step == again.step && before.message == again.message;
  }
  return before.how == again.how && before.unreachable == again.unreachable &&
         before.host == again.host;
}

int failure_exit_code(int status) { return status != 0 ? status : 1; }

}  // namespace tandem::tools
