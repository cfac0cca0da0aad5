// Greedy decoding with the model's incremental decoder (cached keys/values), batched:
// encode once, then one token per unfinished sentence per step until EOS or the length limit.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/model/transformer.h"

namespace tandem::decode {

struct DecodeOptions {
  // At most a * source length + b decoding steps per sentence (EOS is one of them), where source
  // length counts non-pad tokens (EOS included); at least 1, at most the model's max_positions.
  double max_len_a = 1.2;
  int64_t max_len_b = 10;
  int64_t batch_tokens = 4096;  // source tokens per batch when translating many sentences
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // without BOS/EOS
  double score = 0;             // sum of log-probabilities, EOS included (when emitted)
};

// src [batch, src_len] int64 (tokens + EOS, padded with kPad) → one hypothesis per row.
// Runs under NoGradGuard in eval mode (the caller sets model->eval()).
std::vector<Hypothesis> greedy_decode(model::Transformer& model, const torch::Tensor& src,
                                      const DecodeOptions& options);

// Many sentences (token ids, no EOS): sorts by length, batches by batch_tokens, decodes, and
// returns hypotheses in the input order.
std::vector<Hypothesis> translate(model::Transformer& model,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options);

}  // namespace tandem::decode
