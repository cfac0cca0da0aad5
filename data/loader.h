// Per-rank view of the global batch plan. One optimizer step consumes world x accum consecutive
// global batches of the current epoch: micro-step m on rank r takes batch next + m*world + r
// (an empty Batch when the epoch has run out). A step never spans two epochs, so the position
// (epoch, next global batch) means the same thing at any world size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/batch.h"
#include "data/batch_plan.h"
#include "data/corpus.h"

namespace tandem::data {

struct DataPosition {
  int64_t epoch = 0;       // 0-based
  int64_t next_batch = 0;  // index into the epoch's global plan
};

class ShardedLoader {
 public:
  // Reads the split's lengths once; tokens are read per batch from `corpus`.
  ShardedLoader(const Corpus& corpus, std::string split, BatchPlanOptions options, int rank,
                int world_size);

  // This rank's accum_steps micro-batches of the next step; advances the position past the
  // step's world * accum_steps global batches (moving to the next epoch when the plan is used up).
  std::vector<Batch> next_step(int64_t accum_steps);

  DataPosition position() const { return position_; }
  void set_position(const DataPosition& position);
  int64_t batches_in_epoch();  // size of the current epoch's global plan

 private:
  const std::vector<std::vector<int64_t>>& plan();  // the current epoch's, cached
  const Corpus& corpus_;
  std::string split_;
  BatchPlanOptions options_;
  int rank_;
  int world_size_;
  std::vector<int32_t> src_lengths_;
  std::vector<int32_t> tgt_lengths_;
  DataPosition position_;
  int64_t plan_epoch_ = -1;
  std::vector<std::vector<int64_t>> plan_;
};

}  // namespace tandem::data
