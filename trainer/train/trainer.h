// The training loop (train_step), which only coordinates: the loader, forward_backward, the
// gradient reducer and Adam compute; the Cadence, Validation and the CheckpointWriter decide and
// save.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "data/corpus.h"
#include "data/loader.h"
#include "trainer/config/config.h"
#include "trainer/model/transformer.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/ema.h"
#include "trainer/optim/schedule.h"
#include "trainer/parallel/gradient_reducer.h"
#include "trainer/parallel/process_group.h"
#include "trainer/runtime/device.h"
#include "trainer/train/agreement.h"
#include "trainer/train/cadence.h"
#include "trainer/train/checkpoint_writer.h"
#include "trainer/train/metrics_log.h"
#include "trainer/train/progress.h"
#include "trainer/train/resume.h"
#include "trainer/train/validation.h"

namespace tandem::train {

// The training loop. It only coordinates: the loader says what each rank reads, forward_backward
// computes, the gradient reducer sums over ranks, Adam updates; the Cadence says when to log,
// check, validate, save and stop, Validation measures and decides, the CheckpointWriter saves.
// One optimizer step, on every rank (train_step):
//   next batches → forward/backward per micro-batch (gradient buckets all-reduced as they fill,
//   during the last micro-batch's backward) → agree across ranks on the target count and the
//   stop/save votes → finish the gradient reduction → clip → update → move the weights' average.
// On a GPU the host never waits for the device during a step: the gradient norm, the clip factor
// and the skip of a non-finite step are tensors the update reads on the device, and the loss
// figures are summed there until a log step reads a window of them.

class Trainer {
 public:
  // Builds the run on every rank and starts it afresh or resumes it (collective).
  Trainer(config::Config config, parallel::ProcessGroup& group, const ResumeOptions& resume = {});
  ~Trainer();

  // Trains until a stop condition; returns the process exit code (0, or 128 + signal).
  int run();

  // One optimizer step on every rank (run() calls it in a loop; tests and the bench directly).
  StepStats train_step();

  int64_t step() const { return step_; }
  // The step being trained (step() + 1 during a step; step() after it, while it is logged, checked
  // and saved).
  int64_t current_step() const { return std::max(step_, step_in_progress_); }
  const runtime::DeviceChoice& device() const { return device_; }
  const model::Transformer& model() const { return model_; }
  // The run's config, data.max_tokens resolved (batch_fit.h) where it said auto.
  const config::Config& config() const { return config_; }

 private:
  void connect_ranks();  // NCCL for tensors when on GPUs; collective timeouts
  void build_model();    // parameters (rank 0's, later), Adam, the gradient reducer
  void start_fresh();
  void resume_from(const std::string& path, const ResumeOptions& options);
  parallel::Communicator& tensor_comm();  // gradients and parameters: NCCL or MPI
  void clear_gradients();                 // before a step: released alone on a GPU, else zeroed
  void update(StepStats& stats);          // gradient norm, clip, Adam (or skip), the average
  void after_step(ProgressMeter& meter);  // log, check, validate, save, as the cadence says
  // Rank 0, at a log step and at the end: updates skipped for a non-finite gradient norm.
  void log_skipped_updates(int64_t count, int64_t last, int64_t up_to);
  void validate();
  void save_checkpoint();
  int64_t completed_epochs();
  double epoch_progress();  // epochs done, fractional
  std::string banner();

  config::Config config_;
  parallel::ProcessGroup& group_;
  runtime::DeviceChoice device_;
  std::unique_ptr<parallel::Communicator> gpu_comm_;  // NCCL, when training on GPUs
  data::Corpus corpus_;
  std::vector<std::string> corpus_names_;  // the file's corpora when it holds several, else none
  std::unique_ptr<data::ShardedLoader> loader_;  // these three once data.max_tokens is a number
  model::Transformer model_{nullptr};
  std::unique_ptr<optim::Adam> adam_;
  std::unique_ptr<optim::Ema> ema_;  // train.ema_decay > 0
  std::unique_ptr<parallel::GradientReducer> reducer_;
  optim::ScheduleOptions schedule_;
  std::unique_ptr<Validation> validation_;
  std::unique_ptr<CheckpointWriter> checkpoints_;
  Cadence cadence_;
  std::unique_ptr<MetricsLog> metrics_;  // rank 0
  int64_t step_ = 0;
  int64_t step_in_progress_ = 0;
};

}  // namespace tandem::train
