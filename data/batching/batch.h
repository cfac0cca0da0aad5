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
  bool empty() const { return sentences == 0; }
};

Batch make_batch(const std::vector<SentencePair>& pairs);

}  // namespace tandem::data
