// Batch assembly: sentence pairs → padded int64 tensors the model consumes.
// src = tokens + EOS; tgt_in = BOS + tokens; tgt_out = tokens + EOS; padding is kPadId (0).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/corpus/corpus.h"

namespace tandem::data {

struct Batch {
  torch::Tensor src;      // [batch, src_len] int64
  torch::Tensor tgt_in;   // [batch, tgt_len] int64
  torch::Tensor tgt_out;  // [batch, tgt_len] int64
  int64_t sentences = 0;
  int64_t src_tokens = 0;  // non-pad source tokens (EOS included)
  int64_t tgt_tokens = 0;  // non-pad entries of tgt_out: the targets predicted
  // [batch] int64: each pair's direction, its index in Corpus::directions(), when the file
  // holds several (the loader sets it); undefined otherwise.
  torch::Tensor direction;
  // The pairs' word alignments, when read with them (Corpus::Links::kRead) and some pair has
  // links: [links, 3] int64 rows of (batch row, target position, source position), positions in
  // tgt_out and src, by row, then target, then source; [links] float32 weights, 1 / the links of
  // their target position (the row-normalised alignment matrix). Undefined otherwise.
  torch::Tensor links, link_weights;
  int64_t aligned_targets = 0;  // target positions with links
  bool empty() const { return sentences == 0; }
};

Batch make_batch(const std::vector<SentencePair>& pairs);

}  // namespace tandem::data
