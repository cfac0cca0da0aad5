#include "trainer/tools/restarts.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/dir_lock.h"
#include "trainer/common/fault_injection.h"
#include "trainer/common/temp_dir.h"
#include "trainer/common/timestamp.h"
#include "trainer/tools/launcher.h"
#include "trainer/train/metrics_log.h"

namespace tandem::tools {
namespace {

// How long a relaunch waits for the failed job's rank 0 to let go of checkpoint.dir's lock: the
// kernel releases it when the process is gone, which can take a moment after mpirun has exited.
constexpr auto kLockWait = std::chrono::seconds(60);
constexpr auto kLockPoll = std::chrono::milliseconds(100);

void wait_until_directory_free(const std::string& dir) {
  const auto deadline = std::chrono::steady_clock::now() + kLockWait;
  for (;;) {
    try {
      const checkpoint::DirLock free_now(dir);
      return;
    } catch (const std::invalid_argument& e) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(std::string(e.what()) +
                                 ", still 60 s after the failed job ended; not restarting");
      }
      std::this_thread::sleep_for(kLockPoll);
    }
  }
}

struct Checkpoint {
  int64_t step = 0;  // 0: none yet, the job starts from scratch
  std::string path;
};

Checkpoint newest_checkpoint(const std::string& dir) {
  Checkpoint newest;
  newest.path = checkpoint::find_latest(dir);
  if (!newest.path.empty()) newest.step = checkpoint::load_description(newest.path).step;
  return newest;
}

// Whether the stop left a checkpoint written after it came, from the checkpoint itself: the ranks'
// closing lines need not reach us (a scheduler's SIGTERM reaches mpirun as well as the ranks, and
// mpirun then stops relaying their output), and mpirun's status is not 0 then.
void report_stop(const JobResult& result, const std::string& dir, const std::string& tool) {
  const Checkpoint newest = newest_checkpoint(dir);
  std::error_code error;
  const auto written = newest.path.empty() ? std::filesystem::file_time_type::min()
                                           : std::filesystem::last_write_time(newest.path, error);
  const char* name = signal_name(result.stop_signal);
  if (!newest.path.empty() && !error && written >= result.stop_time) {
    std::fprintf(stderr, "%s: stopped by %s; the last step is saved (step %lld, %s)\n",
                 tool.c_str(), name, static_cast<long long>(newest.step), newest.path.c_str());
  } else {
    std::fprintf(stderr, "%s: stopped by %s; no checkpoint was written after it (newest: %s)\n",
                 tool.c_str(), name, newest.path.empty() ? "none" : newest.path.c_str());
  }
}

// The mpirun command of the job's run after `restarts` restarts (which its ranks find in
// TANDEM_RESTART) on `hosts` (written to `hostfile`), or at plan.ranks on this machine.
std::vector<std::string> job_command(const JobPlan& plan, int restarts,
                                     const std::vector<Host>& hosts, const std::string& hostfile,
                                     int64_t accum_steps) {
  setenv(kRestartCountVariable, std::to_string(restarts).c_str(), 1);
  std::vector<std::string> forward = plan.forward_env;
  forward.push_back(kRestartCountVariable);
  MpirunCommand mpirun;
  if (hosts.empty()) {
    mpirun = mpirun_command(plan.ranks, plan.threads, forward);
  } else {
    std::ofstream(hostfile) << hostfile_text(hosts);
    mpirun = mpirun_hosts_command(hostfile, total_slots(hosts), forward);
  }
  std::vector<std::string> argv = mpirun.argv;
  argv.insert(argv.end(), plan.rank_command.begin(), plan.rank_command.end());
  if (accum_steps != plan.accum_steps) {
    argv.insert(argv.end(), {"--set", "train.accum_steps=" + std::to_string(accum_steps)});
  }
  return argv;
}

nlohmann::json restart_record(int restart, const JobFailure& failure, const Checkpoint& from,
                              int ranks, int64_t accum_steps) {
  nlohmann::json record{{"event", "restart"},         {"step", from.step},
                        {"restart", restart},         {"failure", describe(failure)},
                        {"how", failure.how},         {"world_size", ranks},
                        {"accum_steps", accum_steps}, {"time", utc_now_iso8601()}};
  if (failure.rank >= 0) record["rank"] = failure.rank;
  if (!failure.host.empty()) record["host"] = failure.host;
  if (failure.step >= 0) record["failed_step"] = failure.step;
  return record;
}

}  // namespace

int64_t accumulation_for(int64_t accum_before, int ranks_before, int ranks) {
  const int64_t total = accum_before * ranks_before;
  const int64_t lower = std::max<int64_t>(1, total / ranks);
  const int64_t upper = lower + 1;
  return total - lower * ranks <= upper * ranks - total ? lower : upper;
}

std::string reason_not_to_restart(const JobFailure& failure, const JobFailure* previous,
                                  int64_t checkpoint_step, int64_t previous_checkpoint_step,
                                  int restarts_done, int max_restarts) {
  if (failure.stopped) return "the ranks stopped on request";
  if (failure.usage_error) return "bad input (exit code 2), which a restart does not mend";
  if (previous != nullptr && same_failure(*previous, failure) &&
      (failure.step >= 0 || checkpoint_step == previous_checkpoint_step)) {
    return "the same failure came back after a restart from step " +
           std::to_string(previous_checkpoint_step) +
           (failure.step >= 0 ? ", in step " + std::to_string(failure.step) : "");
  }
  if (restarts_done >= max_restarts) {
    return "no restart left (--max-restarts " + std::to_string(max_restarts) + ")";
  }
  return "";
}

std::vector<Host> hosts_that_answer(const std::vector<Host>& hosts, std::string* dropped) {
  std::vector<Host> answering;
  for (const auto& host : hosts) {
    std::string why;
    if (host_answers(host.name, 22, kProbeTimeoutS, &why)) {
      answering.push_back(host);
    } else if (dropped != nullptr) {
      *dropped += (dropped->empty() ? "" : ", ") + host.name + " (" + why + ")";
    }
  }
  return answering;
}

int run_with_restarts(const JobPlan& plan, const RestartOptions& options, const std::string& tool) {
  const train::MetricsOutputs metrics{plan.checkpoint_dir + "/metrics.jsonl", plan.tensorboard_dir};
  const TempDir scratch("hosts");
  const std::string hostfile = scratch.file("hostfile");
  std::vector<Host> hosts = plan.hosts;
  const int first_ranks = hosts.empty() ? plan.ranks : total_slots(hosts);
  int ranks = first_ranks;
  int64_t accum_steps = plan.accum_steps;
  JobFailure previous;
  int64_t previous_checkpoint = -1;
  for (int restarts = 0;; ++restarts) {
    const JobResult result =
        run_job(job_command(plan, restarts, hosts, hostfile, accum_steps), tool);
    if (result.stop_signal != 0) {
      report_stop(result, plan.checkpoint_dir, tool);
      return result.exit_code();
    }
    if (result.status == 0 && ranks_finished(result.last_lines)) return 0;
    // A status of 0 without the ranks' closing line is a failure, said even without restarts.
    if (result.status != 0 && options.max_restarts == 0) return result.exit_code();
    const JobFailure failure = parse_job_failure(result.last_lines, result.status);
    const Checkpoint from = newest_checkpoint(plan.checkpoint_dir);
    std::string why = reason_not_to_restart(failure, restarts > 0 ? &previous : nullptr, from.step,
                                            previous_checkpoint, restarts, options.max_restarts);
    std::string dropped;
    if (why.empty() && !hosts.empty()) {
      hosts = hosts_that_answer(hosts, &dropped);
      ranks = total_slots(hosts);
      if (ranks < options.min_ranks) {
        why = "only " + std::to_string(ranks) +
              " rank(s) left on the hosts that answer, fewer than --min-ranks " +
              std::to_string(options.min_ranks) + " (no answer from " + dropped + ")";
      } else if (options.keep_global_batch) {
        accum_steps = accumulation_for(plan.accum_steps, first_ranks, ranks);
      }
    }
    const std::string what = describe(failure);
    if (!why.empty()) {
      const std::string newest =
          from.path.empty() ? "No checkpoint was saved." : "Newest checkpoint: " + from.path + ".";
      std::fprintf(stderr, "%s: %s; not restarting: %s. %s\n", tool.c_str(), what.c_str(),
                   why.c_str(), newest.c_str());
      return failure_exit_code(result.exit_code());
    }
    const std::string resume_point =
        from.path.empty() ? "scratch (no checkpoint yet)"
                          : "step " + std::to_string(from.step) + " (" + from.path + ")";
    const std::string without = dropped.empty() ? "" : " without " + dropped;
    std::fprintf(stderr,
                 "%s: restart %d of %d: %s; resuming from %s at %d rank(s)%s, accumulation "
                 "%lld\n",
                 tool.c_str(), restarts + 1, options.max_restarts, what.c_str(),
                 resume_point.c_str(), ranks, without.c_str(), static_cast<long long>(accum_steps));
    std::fflush(stderr);
    auto record = restart_record(restarts + 1, failure, from, ranks, accum_steps);
    if (!dropped.empty()) record["dropped_hosts"] = dropped;
    train::append_metrics_record(metrics, record);
    wait_until_directory_free(plan.checkpoint_dir);
    previous = failure;
    previous_checkpoint = from.step;
  }
}

}  // namespace tandem::tools
