// What a training job has saved for its relaunch, as tandem-train's launcher reads it between
// runs: the newest complete checkpoint in checkpoint.dir, its lock, and metrics.jsonl (with
// TensorBoard's events beside it) for the restart records.
#pragma once

#include <string>
#include <vector>

#include "trainer/jobs/restarts.h"

namespace tandem::train {

class SavedCheckpoints : public jobs::SavedProgress {
 public:
  // `tensorboard_dir`: where restarts also go as TensorBoard events; empty: none.
  SavedCheckpoints(std::string checkpoint_dir, std::string tensorboard_dir);

  std::string state_prefix() const override;  // checkpoint.dir/.rank-state
  jobs::SavedPoint saved() const override;    // the newest checkpoint's step and path
  jobs::JobUnit unit() const override { return jobs::JobUnit::kStep; }
  jobs::StopWords stop_words() const override {
    return {"every rank finishes its step and saves a checkpoint", "saved checkpoints"};
  }
  // Whether the stop left the last step saved: rank 0's record says at which step it stopped,
  // and the newest checkpoint must be of that step.
  std::string stop_report(const jobs::JobResult& result,
                          const std::vector<jobs::RankState>& ranks) const override;
  // checkpoint.dir's lock, which the kernel releases when the failed run's rank 0 is gone.
  void wait_until_free() const override;
  void record_restart(const jobs::RestartRecord& record) const override;  // metrics.jsonl

 private:
  std::string checkpoint_dir_, tensorboard_dir_;
};

}  // namespace tandem::train
