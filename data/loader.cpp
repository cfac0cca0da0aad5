// ShardedLoader: this rank's share of each step's global batches, and the data position.
#include "data/loader.h"

#include <stdexcept>
#include <utility>

namespace tandem::data {

ShardedLoader::ShardedLoader(const Corpus& corpus, std::string split, BatchPlanOptions options,
                             int rank, int world_size)
    : corpus_(corpus),
      split_(std::move(split)),
      options_(options),
      rank_(rank),
      world_size_(world_size) {
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    throw std::invalid_argument("loader: rank " + std::to_string(rank_) + " of world size " +
                                std::to_string(world_size_) + "; expected 0 <= rank < world size");
  }
  src_lengths_ = corpus_.src_lengths(split_);
  tgt_lengths_ = corpus_.tgt_lengths(split_);
  if (src_lengths_.empty()) {
    throw std::invalid_argument("corpus '" + corpus_.path() + "': split '" + split_ +
                                "' has no sentence pairs to train on");
  }
}

std::vector<Batch> ShardedLoader::next_step(int64_t accum_steps) {
  if (accum_steps < 1) {
    throw std::invalid_argument("train.accum_steps " + std::to_string(accum_steps) +
                                ": expected >= 1");
  }
  // The previous step used up the epoch: this step starts the next one (steps never span two).
  if (position_.next_batch >= batches_in_epoch()) {
    position_ = DataPosition{position_.epoch + 1, 0};
  }
  const auto& batches = plan();
  const auto total = static_cast<int64_t>(batches.size());
  std::vector<Batch> micro_batches;
  for (int64_t m = 0; m < accum_steps; ++m) {
    const int64_t index = position_.next_batch + m * world_size_ + rank_;
    micro_batches.push_back(index < total ? make_batch(corpus_.read(split_, batches[index]))
                                          : make_batch({}));
  }
  position_.next_batch += accum_steps * world_size_;
  return micro_batches;
}

void ShardedLoader::set_position(const DataPosition& position) {
  if (position.epoch < 0 || position.next_batch < 0) {
    throw std::invalid_argument("data position (epoch " + std::to_string(position.epoch) +
                                ", next batch " + std::to_string(position.next_batch) +
                                "): expected both >= 0");
  }
  position_ = position;
}

int64_t ShardedLoader::batches_in_epoch() { return static_cast<int64_t>(plan().size()); }

const std::vector<std::vector<int64_t>>& ShardedLoader::plan() {
  if (plan_epoch_ != position_.epoch) {
    plan_ = make_batch_plan(src_lengths_, tgt_lengths_, options_, position_.epoch);
    plan_epoch_ = position_.epoch;
  }
  return plan_;
}

}  // namespace tandem::data
