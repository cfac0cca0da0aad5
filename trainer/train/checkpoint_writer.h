// Checkpoint assembly during training: everything a run saves at a step, written by rank 0 as
// step-<step>.h5 with last.h5 and best.h5, older step files pruned.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/batching/loader.h"
#include "trainer/config/config.h"
#include "trainer/jobs/job_lock.h"
#include "trainer/model/transformer.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/ema.h"
#include "trainer/parallel/communicator.h"

namespace tandem::train {

// Checkpoint assembly during training: what a run saves at a step (parameters, their moving
// average when kept, optimizer state,
// learning rate, data position, every rank's RNG state, the resolved config, the keep-best state,
// the vocabulary), written by rank 0 as step-<step>.h5 with last.h5 pointing at it and older step
// files pruned; and best.h5, pointed at the best validated step's file. Rank 0's writer owns the
// directory for the job's lifetime (jobs::JobLock): a second job on it is refused.

// The run at the step being saved, as the trainer holds it.
struct RunState {
  int64_t step = 0;
  const model::Transformer& model;
  const optim::Adam& adam;
  const optim::Ema* ema;  // null when the run keeps no average
  double lr = 0;  // the schedule's learning rate at `step`
  data::DataPosition position;
  std::string validation;  // KeepBest::to_json()
};

class CheckpointWriter {
 public:
  // `owner` (rank 0) creates and locks checkpoint.dir; std::invalid_argument naming the holder
  // when another job has it.
  // lora_base_hash: a LoRA run's base (model_io.h), recorded in each checkpoint; else empty.
  CheckpointWriter(const config::Config& config, std::string vocab_bytes,
                   std::string lora_base_hash, bool owner);

  // Collective: every rank's RNG state travels to rank 0 over `comm` (the host's), and, when the
  // optimizer state is sharded, every rank's pieces of it over `tensors` (where the tensors live:
  // MPI or NCCL); rank 0 writes, atomically, and logs.
  void save(const RunState& state, parallel::Communicator& comm,
            parallel::Communicator& tensors) const;
  // Rank 0: best.h5 becomes the checkpoint of `step` (which must exist).
  void link_best(int64_t step) const;
  // The path of the step file of `step`.
  std::string step_path(int64_t step) const;

 private:
  std::string dir_;
  int64_t keep_last_;
  std::string config_yaml_;
  std::string vocab_bytes_;
  std::string lora_base_hash_;
  std::unique_ptr<jobs::JobLock> lock_;  // owner only
};

}  // namespace tandem::train
