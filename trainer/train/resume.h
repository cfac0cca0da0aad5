// Resuming a run from a checkpoint on every rank at once: rank 0 reads the file and sends the
// others what they need.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batching/loader.h"
#include "data/corpus/corpus.h"
#include "trainer/model/transformer.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/ema.h"
#include "trainer/parallel/communicator.h"

namespace tandem::train {

// Resuming a run from a checkpoint, on every rank at once. Rank 0 alone reads the file (it may
// live on rank 0's disk only, and a bad file then fails on one rank with one message) and sends
// the others what they need: parameters by broadcast, the optimizer's moments and the average to
// the ranks that keep them (every rank, or with sharded state each piece's owner), the rest as one
// CBOR message. Any world size, sharded or not, reads any checkpoint.

struct ResumeOptions {
  std::string path;              // empty: the newest checkpoint in checkpoint.dir, if any
  bool reset_optimizer = false;  // start Adam's moments afresh (fine-tuning)
  bool reset_data = false;       // start at the first batch of epoch 1 (e.g. a new corpus)
};

// Where a resumed run continues from, besides the tensors loaded in place.
struct ResumePoint {
  int64_t step = 0;
  int64_t world_size = 0;  // of the run that wrote the checkpoint
  data::DataPosition position;
  int64_t optimizer_step = 0;
  std::vector<std::string> rng;  // that run's CPU generator states, one per rank
  std::string validation;        // its keep-best state (KeepBest::to_json), "" when none
  bool average_continues = false;  // the kept average goes on from the checkpoint's (else it
                                   // restarts from the weights)
};

// What resuming loads in place, and the corpus whose vocabulary the checkpoint must share.
struct ResumeTarget {
  model::Transformer& model;
  optim::Adam& adam;
  optim::Ema* ema;  // null when the run keeps no average
  const data::Corpus& corpus;
  std::string lora_base_hash;  // a LoRA run's base (model_io.h); else empty
};

// Collective: afterwards every rank holds the checkpoint's parameters and, unless
// options.reset_optimizer, its optimizer state. A kept average continues from the checkpoint's, or
// restarts from its parameters when the checkpoint has none or the optimizer is reset
// (fine-tuning). Rank 0 throws std::invalid_argument naming the file for a checkpoint of another
// vocabulary, or without optimizer state (an averaged one) when the optimizer is not reset.
ResumePoint load_everywhere(const std::string& path, const ResumeOptions& options,
                            const ResumeTarget& target, parallel::Communicator& host,
                            parallel::Communicator& tensors);

// The dropout streams of a resumed run on `device`: at the same world size, this rank's saved
// streams (CPU, and the GPU's where the checkpoint was written on one; a GPU stream it lacks
// continues from a seed fixed by the step); at another, every stream reseeded from (train.seed,
// rank, step), with a log line.
void restore_dropout_streams(const ResumePoint& point, uint64_t seed, int rank, int world_size,
                             const torch::Device& device);

}  // namespace tandem::train
