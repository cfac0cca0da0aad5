// The global batch plan: from (seed, epoch) every rank computes the same list of batches —
// shuffle, sort by length inside pools, cut by a token budget, shuffle the batches. The same cut
// batches evaluation and decoding (sorted_batches).
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::data {

struct BatchPlanOptions {
  int64_t max_tokens = 4096;   // per batch: sentences x padded length must not exceed this
  uint64_t seed = 1;
  int64_t pool_batches = 100;  // sort inside pools of about this many batches' worth of sentences
};

// Padded length a sentence pair occupies: max(src + EOS, BOS + tgt) = max(src, tgt) + 1.
int64_t padded_length(int32_t src_len, int32_t tgt_len);

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

// The batches of `epoch` (0-based), each a list of sentence indices. Every sentence appears in
// exactly one batch; a sentence longer than max_tokens gets a batch of its own. Deterministic:
// the same inputs give the same plan on every machine (no std:: distributions).
std::vector<std::vector<int64_t>> make_batch_plan(const std::vector<int32_t>& src_lengths,
                                                  const std::vector<int32_t>& tgt_lengths,
                                                  const BatchPlanOptions& options, int64_t epoch);

}  // namespace tandem::data
