// The global batch plan: from (seed, epoch) every rank computes the same list of batches —
// shuffle, sort by length inside pools, cut by a token budget, shuffle the batches. The same cut
// batches evaluation and decoding (sorted_batches).
#pragma once

#include <cstdint>
#include <vector>

#include "data/corpus/direction.h"

namespace tandem::data {

// One direction of a split that holds several (tandem-prep --corpora), as an epoch draws from it:
// its pairs of the split, and how many pairs an epoch takes from them (direction_sampling.h
// decides).
struct DirectionDraws {
  PairRange pairs;
  int64_t draws = 0;  // pairs.count: each pair once; more: some twice or more; fewer: a subset
};

struct BatchPlanOptions {
  int64_t max_tokens = 4096;  // per batch: sentences x padded length must not exceed this
  uint64_t seed = 1;
  int64_t pool_batches = 100;  // sort inside pools of about this many batches' worth of sentences
  // Empty: each pair of the split once an epoch. Else every direction of the split, their ranges
  // tiling it in order: an epoch takes each direction's pairs draws / count times over, and
  // draws % count more of them, chosen by the seed and the epoch without repeats.
  std::vector<DirectionDraws> directions;
};

// Padded length a sentence pair occupies: max(src + EOS, BOS + tgt) = max(src, tgt) + 1.
int64_t padded_length(int32_t src_len, int32_t tgt_len);

// Padded lengths in 16 bits, the plan's only input per sentence (2 bytes a pair, so a rank can
// plan 100M pairs). Throws std::invalid_argument if a pair does not fit or the sides' counts
// differ.
std::vector<uint16_t> padded_lengths(const std::vector<int32_t>& src_lengths,
                                     const std::vector<int32_t>& tgt_lengths);

// `order` (sentence indices, sorted by length) cut into consecutive batches: a batch grows while
// its sentences x the longest padded[] among them stay within max_tokens; a sentence longer than
// max_tokens gets a batch of its own.
std::vector<std::vector<int64_t>> cut_batches(const std::vector<int64_t>& order,
                                              const std::vector<int64_t>& padded,
                                              int64_t max_tokens);

// Every index of `padded` (padded lengths), stably sorted by length and cut by cut_batches: the
// batches of evaluation and decoding, with little padding and no randomness.
std::vector<std::vector<int64_t>> sorted_batches(const std::vector<int64_t>& padded,
                                                 int64_t max_tokens);

// One epoch's batches, each a list of sentence indices, stored in 4 bytes a sentence (plus 12 a
// batch): the cut sentences back to back, where each batch starts, and the shuffled batch order.
// A rank keeps only its share (keep_share): the batches it will read, 4 / world bytes a sentence.
class BatchPlan {
 public:
  int64_t size() const { return size_; }  // batches of the epoch, kept or not
  bool empty() const { return size_ == 0; }
  // The index-th batch of the epoch; std::out_of_range past the end or outside the kept share.
  std::vector<int64_t> batch(int64_t index) const;
  std::vector<std::vector<int64_t>> batches() const;  // all of them, in order (whole plans)

  // Keeps only batches first, first + stride, first + 2 stride, … (a rank's batches when each
  // step starts at a multiple of stride away from first - rank) and frees the others' sentences.
  // Once only: a share of a share is std::invalid_argument (0, 1 keeps the whole plan).
  void keep_share(int64_t first, int64_t stride);

 private:
  friend BatchPlan make_batch_plan(const std::vector<uint16_t>&, const BatchPlanOptions&, int64_t);
  std::vector<uint32_t> sentences_;  // cut batches back to back, in cut order
  std::vector<uint64_t> starts_;     // cut batch b is sentences_[starts_[b], starts_[b + 1])
  std::vector<uint32_t> order_;      // the j-th kept batch is cut batch order_[j]
  int64_t size_ = 0;
  int64_t first_ = 0, stride_ = 1;  // the epoch's batch first + j * stride is the j-th kept one
};

// The batches of `epoch` (0-based) over sentences of these padded lengths. Every sentence appears
// in exactly one batch; a sentence longer than max_tokens gets a batch of its own. Deterministic:
// the same inputs give the same plan on every machine (no std:: distributions).
BatchPlan make_batch_plan(const std::vector<uint16_t>& padded, const BatchPlanOptions& options,
                          int64_t epoch);

}  // namespace tandem::data
