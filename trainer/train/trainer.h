// The training loop. It only coordinates: the loader decides what each rank reads, the model
// computes, the reducer averages gradients, Adam updates, and the checkpoint module persists.
// One optimizer step, on every rank:
//   next_batches → forward/backward (gradient buckets all-reduced as they fill, overlapping the
//   last micro-batch's backward) → stats all-reduce → scale → clip → update → log/save/stop.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/corpus.h"
#include "data/loader.h"
#include "trainer/config/config.h"
#include "trainer/parallel/gradient_reducer.h"
#include "trainer/parallel/process_group.h"
#include "trainer/model/transformer.h"
#include "trainer/optim/adam.h"
#include "trainer/train/metrics_log.h"
#include "trainer/train/device.h"
#include "trainer/train/progress.h"
#include "trainer/train/validator.h"

namespace tandem::train {

struct ResumeOptions {
  std::string path;              // empty: the newest checkpoint in checkpoint.dir, if any
  bool reset_optimizer = false;  // start Adam's moments afresh (fine-tuning)
  bool reset_data = false;       // start at the first batch of epoch 1 (e.g. a new corpus)
};

struct ResumeHeader;

class Trainer {
 public:
  Trainer(config::Config config, parallel::ProcessGroup& group, const ResumeOptions& resume = {});
  ~Trainer();

  // Trains until a stop condition; returns the process exit code (0, or 128 + signal).
  int run();

  // One optimizer step on every rank (run() calls it in a loop; tests call it directly).
  StepStats train_step();

  int64_t step() const { return step_; }
  const DeviceChoice& device() const { return device_; }
  const model::Transformer& model() const { return model_; }

 private:
  void start_fresh();
  void resume_from(const std::string& path, const ResumeOptions& options);
  ResumeHeader read_checkpoint(const std::string& path, const ResumeOptions& options);  // rank 0
  void restore_rng(const ResumeHeader& header);
  void restore_validation(const std::string& checkpoint_json);
  std::string validation_state() const;  // what checkpoints store; "" before any validation
  bool stop_requested_locally() const;  // a signal, or (rank 0) the time limit
  bool save_due_locally() const;        // (rank 0) checkpoint.every_minutes has passed
  void check_ranks_agree();
  void validate();  // collective; updates best.h5 and the early-stopping count
  bool should_stop();
  int64_t completed_epochs();
  double epoch_progress();  // epochs done, fractional
  void save_checkpoint();
  void report(const ProgressRecord& record);
  std::string banner() const;

  config::Config config_;
  parallel::ProcessGroup& group_;
  parallel::Communicator& comm_;  // MPI: host values, and CPU tensors
  DeviceChoice device_;
  std::unique_ptr<parallel::Communicator> gpu_comm_;  // NCCL, when training on GPUs
  parallel::Communicator* tensor_comm_ = nullptr;     // gradients and parameters: gpu_comm_ or comm_
  data::Corpus corpus_;
  data::ShardedLoader loader_;
  std::string vocab_bytes_;
  int64_t vocab_size_ = 0;
  model::Transformer model_{nullptr};
  std::vector<torch::Tensor> params_;
  std::unique_ptr<optim::Adam> adam_;
  std::unique_ptr<parallel::GradientReducer> reducer_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<data::Vocab> vocab_;       // for validation only
  std::unique_ptr<Validator> validator_;     // null when valid.every_steps is 0
  int64_t last_valid_step_ = -1;
  int64_t best_valid_step_ = -1;
  double best_valid_score_ = 0;
  int64_t bad_validations_ = 0;
  bool early_stop_ = false;
  nlohmann::json validation_history_ = nlohmann::json::array();
  int64_t step_ = 0;
  int64_t last_saved_step_ = -1;
  bool stop_requested_ = false;  // agreed by all ranks at the last step
  bool save_due_ = false;        // likewise
  std::chrono::steady_clock::time_point last_save_time_;
  std::chrono::steady_clock::time_point started_;
};

}  // namespace tandem::train
