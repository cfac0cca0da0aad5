// The training loop (train_step), which only coordinates: the loader, forward_backward, the
// gradient reducer and Adam compute; the Cadence, Validation and the CheckpointWriter decide and
// save.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "data/batching/loader.h"
#include "data/corpus/corpus.h"
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
#include "trainer/train/forward_backward.h"
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

// The ranks a Trainer runs on: the process group (MPI, for host-side agreement and small values),
// and NCCL for tensors when training on GPUs.
struct TrainerRanks {
  parallel::ProcessGroup& group;
  std::unique_ptr<parallel::Communicator> gpu;  // NCCL, when training on GPUs

  parallel::Communicator& tensors() { return gpu ? *gpu : group.cpu(); }  // NCCL or MPI
};

// What an update needs beside the model: Adam (which holds the parameters), the weights' moving
// average, the gradient reducer and the learning-rate schedule.
struct TrainerOptimizer {
  std::unique_ptr<optim::Adam> adam;
  std::unique_ptr<optim::Ema> ema;  // train.ema_decay > 0
  std::unique_ptr<parallel::GradientReducer> reducer;
  optim::ScheduleOptions schedule;
};

// The model trained and, under LoRA, the content hash of the frozen base its adapters sit beside
// (model_io.h; the checkpoints record it, a resume checks it); empty otherwise.
struct TrainerModel {
  model::Transformer net{nullptr};
  std::string lora_base_hash;
};

// Where the run's records go: checkpoints (every rank takes part in a save) and, on rank 0, the
// metrics log.
struct TrainerOutputs {
  std::unique_ptr<CheckpointWriter> checkpoints;
  std::unique_ptr<MetricsLog> metrics;  // rank 0
};

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
  const model::Transformer& model() const { return model_.net; }
  // The run's config, data.max_tokens resolved (batch_fit.h) where it said auto.
  const config::Config& config() const { return config_; }

 private:
  void connect_ranks();  // NCCL for tensors when on GPUs; collective timeouts
  void build_model();    // parameters (rank 0's, later), Adam, the gradient reducer
  model::Transformer lora_model(model::TransformerOptions options);  // lora.base's, adapted
  // The loader over the train split (once data.max_tokens is a number), and validation.
  void open_data(const std::string& resume_path);
  void start_fresh();
  void resume_from(const std::string& path, const ResumeOptions& options);
  void clear_gradients();                 // before a step: released alone on a GPU, else zeroed
  void update(StepStats& stats);          // gradient norm, clip, Adam (or skip), the average
  void share_updated_parameters();        // sharded optimizer state: the owners' pieces to all
  void after_step(ProgressMeter& meter);  // log, check, validate, save, as the cadence says
  // Rank 0, at a log step and at the end: updates skipped for a non-finite gradient norm.
  void log_skipped_updates(int64_t count, int64_t last, int64_t up_to);
  void validate();
  void save_checkpoint();
  int64_t completed_epochs();
  double epoch_progress();  // epochs done, fractional
  std::string banner();

  config::Config config_;
  TrainerRanks ranks_;
  runtime::DeviceChoice device_;
  data::Corpus corpus_;
  std::unique_ptr<data::ShardedLoader> loader_;  // once data.max_tokens is a number
  LossTerms loss_terms_;                          // label smoothing, guided alignment
  TrainerModel model_;
  TrainerOptimizer optimizer_;
  std::unique_ptr<Validation> validation_;
  TrainerOutputs outputs_;
  Cadence cadence_;
  int64_t step_ = 0;
  int64_t step_in_progress_ = 0;
};

}  // namespace tandem::train
