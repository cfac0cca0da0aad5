// Greedy decoding: at every step the most probable token, until EOS or the length limit. It is
// beam search with beam size 1 (one code path), kept under its own name for callers and tests.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "trainer/decode/beam.h"
#include "trainer/model/transformer.h"

namespace tandem::decode {

// src [batch, src_len] int64 (tokens + EOS, padded with kPadId) → one hypothesis per row.
// options.beam_size and options.nbest are ignored (1); the rest applies as in beam_search().
std::vector<Hypothesis> greedy_decode(model::Transformer& model, const torch::Tensor& src,
                                      const DecodeOptions& options);

}  // namespace tandem::decode
