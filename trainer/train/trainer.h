// The training loop. It only coordinates: the loader decides what each rank reads, the model
// computes, the reducer averages gradients, Adam updates, and the checkpoint module persists.
// One optimizer step, on every rank:
//   next_batches → forward_backward → reduce (one all-reduce) → clip → update → log/save/stop.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "data/corpus.h"
#include "data/loader.h"
#include "trainer/config/config.h"
#include "trainer/dist/gradient_reducer.h"
#include "trainer/dist/process_group.h"
#include "trainer/model/transformer.h"
#include "trainer/optim/adam.h"
#include "trainer/train/metrics_log.h"
#include "trainer/train/progress.h"

namespace tandem::train {

class Trainer {
 public:
  // `resume` empty: continue from the newest checkpoint in config.checkpoint.dir if there is one.
  Trainer(config::Config config, dist::ProcessGroup& group, const std::string& resume);
  ~Trainer();

  // Trains until a stop condition; returns the process exit code (0, or 128 + signal).
  int run();

  // One optimizer step on every rank (run() calls it in a loop; tests call it directly).
  StepStats train_step();

  int64_t step() const { return step_; }
  const model::Transformer& model() const { return model_; }

 private:
  void start_fresh();
  void resume_from(const std::string& path);
  bool stop_requested_locally() const;  // a signal, or (rank 0) the time limit
  bool should_stop();
  int64_t completed_epochs();
  double epoch_progress();  // epochs done, fractional
  void save_checkpoint();
  void report(const ProgressRecord& record);
  std::string banner() const;

  config::Config config_;
  dist::ProcessGroup& group_;
  dist::Communicator& comm_;
  data::Corpus corpus_;
  data::ShardedLoader loader_;
  std::string vocab_bytes_;
  int64_t vocab_size_ = 0;
  model::Transformer model_{nullptr};
  std::vector<torch::Tensor> params_;
  std::unique_ptr<optim::Adam> adam_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  std::unique_ptr<MetricsLog> metrics_;
  int64_t step_ = 0;
  int64_t last_saved_step_ = -1;
  bool stop_requested_ = false;  // agreed by all ranks at the last step
  std::chrono::steady_clock::time_point started_;
};

}  // namespace tandem::train
