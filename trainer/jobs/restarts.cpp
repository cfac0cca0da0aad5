#include "trainer/jobs/restarts.h"

#include <cstdio>
#include <stdexcept>

#include "trainer/common/atomic_file.h"
#include "trainer/common/fault_injection.h"
#include "trainer/common/temp_dir.h"
#include "trainer/common/timestamp.h"
#include "trainer/jobs/job_supervisor.h"
#include "trainer/jobs/mpirun_command.h"
#include "trainer/jobs/rank_state.h"
#include "trainer/jobs/state_folder.h"

namespace tandem::jobs {
namespace {

// What plan.relaunch_arguments adds to a run at `ranks`.
RelaunchArguments relaunch_arguments(const JobPlan& plan, int ranks) {
  return plan.relaunch_arguments ? plan.relaunch_arguments(ranks) : RelaunchArguments{};
}

// The mpirun command of the job's run after `restarts` restarts (which its ranks find in
// TANDEM_RESTART) on `hosts` (written to `hostfile`), or at plan.ranks on this machine, with what
// plan.relaunch_arguments adds at `ranks`; its ranks leave their state records in `state_dir`
// (TANDEM_STATE_DIR). The ranks' variables are set on mpirun's command line, not here.
MpirunCommand job_command(const JobPlan& plan, int restarts, const std::vector<Host>& hosts,
                          const std::string& hostfile, int ranks, const std::string& state_dir) {
  std::vector<std::string> forward = plan.forward_env;
  forward.push_back(std::string(kRestartCountVariable) + "=" + std::to_string(restarts));
  forward.push_back(std::string(kRankStateDirVariable) + "=" + state_dir);
  MpirunCommand mpirun;
  if (hosts.empty()) {
    mpirun = mpirun_command(plan.ranks, plan.threads, forward);
  } else {
    write_file_atomically(hostfile, hostfile_text(hosts));
    mpirun = mpirun_hosts_command(hostfile, total_slots(hosts), forward);
  }
  mpirun.argv.insert(mpirun.argv.end(), plan.rank_command.begin(), plan.rank_command.end());
  const std::vector<std::string> added = relaunch_arguments(plan, ranks).argv;
  mpirun.argv.insert(mpirun.argv.end(), added.begin(), added.end());
  return mpirun;
}

RestartRecord restart_record(int restart, const JobFailure& failure, const SavedPoint& from,
                             int ranks, JobUnit unit) {
  RestartRecord record;
  record.unit = unit;
  record.restart = restart;
  record.from = from.count;
  record.failure = describe(failure, unit);
  record.how = failure.how;
  record.ranks = ranks;
  record.time = utc_now_iso8601();
  record.rank = failure.rank;
  record.host = failure.host;
  record.failed_in = failure.at;
  return record;
}

// One run of the job: its ranks' state records are read from a folder of the run's own (a
// relaunched job's ranks must not find the last run's, nor a job that starts as this one ends
// lose its folder to this one's clean-up), removed afterwards.
struct JobRun {
  JobResult result;
  std::vector<RankState> ranks;
};

JobRun run_once(const JobPlan& plan, const SavedProgress& progress, int restarts,
                const std::vector<Host>& hosts, const std::string& hostfile, int ranks,
                const std::string& tool) {
  const StateFolder state(progress.state_prefix());
  const MpirunCommand command = job_command(plan, restarts, hosts, hostfile, ranks, state.path());
  JobRun run;
  run.result = run_job(command.argv, command.environment, tool, progress.stop_words());
  run.ranks = read_rank_states(state.path());
  return run;
}

}  // namespace

std::string reason_not_to_restart(const JobFailure& failure, const JobFailure* previous,
                                  int64_t saved, int64_t previous_saved, int restarts_done,
                                  int max_restarts, JobUnit unit) {
  if (failure.kind == FailureKind::kStopped) return "the ranks stopped on request";
  if (failure.kind == FailureKind::kUsage) {
    return "bad input (exit code 2), which a restart does not mend";
  }
  if (previous != nullptr && same_failure(*previous, failure) &&
      (failure.at >= 0 || saved == previous_saved)) {
    const std::string name = unit_name(unit);
    const std::string from = unit == JobUnit::kStep
                                 ? "step " + std::to_string(previous_saved)
                                 : std::to_string(previous_saved) + " " + name + "(s) done";
    return "the same failure came back after a restart from " + from +
           (failure.at >= 0 ? ", in " + name + " " + std::to_string(failure.at) : "");
  }
  if (restarts_done >= max_restarts) {
    return "no restart left (--max-restarts " + std::to_string(max_restarts) + ")";
  }
  return "";
}

std::vector<Host> hosts_that_answer(const std::vector<Host>& hosts,
                                    std::vector<std::string>* dropped) {
  std::vector<Host> answering;
  for (const auto& host : hosts) {
    std::string why;
    if (host_answers(host.name, 22, kProbeTimeoutS, &why)) {
      answering.push_back(host);
    } else if (dropped != nullptr) {
      dropped->push_back(host.name + " (" + why + ")");
    }
  }
  return answering;
}

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
  return text;
}

// Where a failed job goes next: relaunched on `hosts` (empty: this machine) at `ranks`, or not
// (`why_not` says why).
struct Relaunch {
  std::string why_not;
  std::vector<Host> hosts;
  int ranks = 1;
  std::vector<std::string> dropped;  // hosts that no longer answer, each "name (why)"
};

// With a hostfile, the hosts that still answer; too few of them is a reason not to relaunch.
void fit_to_answering_hosts(const RestartOptions& options, Relaunch& next) {
  if (!next.why_not.empty() || next.hosts.empty()) return;
  next.hosts = hosts_that_answer(next.hosts, &next.dropped);
  next.ranks = total_slots(next.hosts);
  if (next.ranks < options.min_ranks) {
    next.why_not = "only " + std::to_string(next.ranks) +
                   " rank(s) left on the hosts that answer, fewer than --min-ranks " +
                   std::to_string(options.min_ranks) + " (no answer from " + joined(next.dropped) +
                   ")";
  }
}

// The restart's line and its record.
void announce_restart(const JobPlan& plan, const SavedProgress& progress,
                      const RestartOptions& options, int restart, const JobFailure& failure,
                      const SavedPoint& from, const Relaunch& next, const std::string& tool) {
  const std::string without = next.dropped.empty() ? "" : " without " + joined(next.dropped);
  const RelaunchArguments added = relaunch_arguments(plan, next.ranks);
  std::fprintf(stderr, "%s: restart %d of %d: %s; resuming from %s at %d rank(s)%s%s\n",
               tool.c_str(), restart, options.max_restarts,
               describe(failure, progress.unit()).c_str(), from.text.c_str(), next.ranks,
               without.c_str(), added.words.c_str());
  std::fflush(stderr);
  RestartRecord record = restart_record(restart, failure, from, next.ranks, progress.unit());
  record.dropped_hosts = next.dropped;
  record.settings = added.settings;
  progress.record_restart(record);
}

}  // namespace

int run_with_restarts(const JobPlan& plan, const RestartOptions& options,
                      const SavedProgress& progress, const std::string& tool) {
  const TempDir scratch("hosts");
  const std::string hostfile = scratch.file("hostfile");
  const int first_ranks = plan.hosts.empty() ? plan.ranks : total_slots(plan.hosts);
  Relaunch next{"", plan.hosts, first_ranks, {}};
  JobFailure previous;
  int64_t previous_saved = -1;
  for (int restarts = 0;; ++restarts) {
    const JobRun run =
        run_once(plan, progress, restarts, next.hosts, hostfile, next.ranks, tool);
    const JobResult& result = run.result;
    if (result.stop_signal != 0) {
      std::fprintf(stderr, "%s: %s\n", tool.c_str(), progress.stop_report(result, run.ranks).c_str());
      return result.exit_code();
    }
    if (result.status == 0 && job_finished(run.ranks)) return 0;
    // A status of 0 without rank 0's record of the end is a failure, said even without restarts.
    if (result.status != 0 && options.max_restarts == 0) return result.exit_code();
    const JobFailure failure = parse_job_failure(result.last_lines, result.status, run.ranks);
    const SavedPoint from = progress.saved();
    next.dropped.clear();
    next.why_not =
        reason_not_to_restart(failure, restarts > 0 ? &previous : nullptr, from.count,
                              previous_saved, restarts, options.max_restarts, progress.unit());
    fit_to_answering_hosts(options, next);
    if (!next.why_not.empty()) {
      std::fprintf(stderr, "%s: %s; not restarting: %s. Saved so far: %s.\n", tool.c_str(),
                   describe(failure, progress.unit()).c_str(), next.why_not.c_str(),
                   from.text.c_str());
      return failure_exit_code(result.exit_code());
    }
    announce_restart(plan, progress, options, restarts + 1, failure, from, next, tool);
    progress.wait_until_free();
    previous = failure;
    previous_saved = from.count;
  }
}

}  // namespace tandem::jobs
