#include "trainer/train/saved_checkpoints.h"

#include <algorithm>
#include <utility>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/jobs/job_lock.h"
#include "trainer/jobs/stop_signals.h"
#include "trainer/train/metrics_log.h"

namespace tandem::train {
namespace {

// The folder of checkpoint.dir where a run's ranks leave their state records (jobs/rank_state.h).
constexpr const char* kRankStateFolder = ".rank-state";

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

}  // namespace

SavedCheckpoints::SavedCheckpoints(std::string checkpoint_dir, std::string tensorboard_dir)
    : checkpoint_dir_(std::move(checkpoint_dir)), tensorboard_dir_(std::move(tensorboard_dir)) {}

std::string SavedCheckpoints::state_prefix() const {
  return checkpoint_dir_ + "/" + kRankStateFolder;
}

jobs::SavedPoint SavedCheckpoints::saved() const {
  const Checkpoint newest = newest_checkpoint(checkpoint_dir_);
  if (newest.path.empty()) return {0, "scratch (no checkpoint yet)"};
  return {newest.step, "step " + std::to_string(newest.step) + " (" + newest.path + ")"};
}

// (The ranks' closing lines need not reach the launcher: a scheduler's SIGTERM reaches mpirun as
// well as the ranks, and mpirun then stops relaying their output.)
std::string SavedCheckpoints::stop_report(const jobs::JobResult& result,
                                          const std::vector<jobs::RankState>& ranks) const {
  const Checkpoint newest = newest_checkpoint(checkpoint_dir_);
  const auto zero = std::find_if(ranks.begin(), ranks.end(),
                                 [](const jobs::RankState& state) { return state.rank == 0; });
  const bool saved = zero != ranks.end() && zero->outcome == jobs::RankState::Outcome::kStopped &&
                     !newest.path.empty() && newest.step == zero->at;
  const std::string name = jobs::signal_name(result.stop_signal);
  if (saved) {
    return "stopped by " + name + "; the last step is saved (step " + std::to_string(newest.step) +
           ", " + newest.path + ")";
  }
  return "stopped by " + name + "; no checkpoint was written after it (newest: " +
         (newest.path.empty() ? "none" : newest.path) + ")";
}

void SavedCheckpoints::wait_until_free() const {
  jobs::wait_until_free(jobs::checkpoint_dir_target(checkpoint_dir_));
}

void SavedCheckpoints::record_restart(const jobs::RestartRecord& record) const {
  train::append_metrics_record({checkpoint_dir_ + "/metrics.jsonl", tensorboard_dir_},
                               record.to_json());
}

}  // namespace tandem::train
