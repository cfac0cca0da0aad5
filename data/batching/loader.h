// Each rank's view of the global batch plan: the batches of its steps, read (optionally ahead, on
// a prefetch thread) in the same order at any world size.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/batching/batch.h"
#include "data/batching/batch_plan.h"
#include "data/corpus/corpus.h"

namespace tandem::data {

// Per-rank view of the global batch plan. One optimizer step consumes world x accum consecutive
// global batches of the current epoch: micro-step m on rank r takes batch next + m*world + r
// (an empty Batch when the epoch has run out). A step never spans two epochs, so the position
// (epoch, next global batch) means the same thing at any world size.
//
// With prefetch_steps > 0 a thread reads and assembles the next steps' batches while the current
// step runs (a queue of at most that many steps). The batches and positions are the same as
// without it: position() is always that after the last step handed out, so checkpoints stay
// exact; an error on the thread is thrown by the next_step() that would have met it.

struct DataPosition {
  int64_t epoch = 0;       // 0-based
  int64_t next_batch = 0;  // index into the epoch's global plan
};

class ShardedLoader {
 public:
  // Memory: the corpus' 4 bytes a pair for the split's lengths, and 4 bytes a pair for the
  // current epoch's plan. Tokens are read per batch from `corpus`, which must outlive the loader.
  ShardedLoader(const Corpus& corpus, std::string split, BatchPlanOptions options, int rank,
                int world_size, int64_t prefetch_steps = 0);
  ShardedLoader(ShardedLoader&&) noexcept;
  ShardedLoader& operator=(ShardedLoader&&) noexcept;
  ~ShardedLoader();  // stops the prefetch thread

  // This rank's accum_steps micro-batches of the next step; advances the position past the
  // step's world * accum_steps global batches (moving to the next epoch when the plan is used up).
  std::vector<Batch> next_step(int64_t accum_steps);

  DataPosition position() const;
  void set_position(const DataPosition& position);  // drops what was prefetched
  int64_t batches_in_epoch();                       // size of the current epoch's global plan
  // The directions its batches say their pairs are of (Batch::direction): the file's count when it
  // holds several, else 0.
  int64_t directions() const;

  // Batches handed out from now on hold their tensors in page-locked memory, pinned on the
  // prefetch thread, so that a GPU copies them asynchronously (LibTorch with CUDA only).
  void pin_batches(bool pinned);
  // Batches handed out from now on carry their pairs' word alignments (Batch::links), where the
  // split has them.
  void read_links(bool links);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::data
