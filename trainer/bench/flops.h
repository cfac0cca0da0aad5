// Model FLOPs per target token of one training step of the encoder-decoder Transformer, counted
// from its matrix products, and the sentence-length statistics of a corpus split that the count
// needs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace tandem::bench {

// Token-weighted lengths of a split; sentences count their EOS (source) or BOS/EOS (target) token,
// as in data/batching/batch.h, and no padding.
struct LengthStats {
  double src_per_tgt = 1;  // r: source tokens per target token
  double src_keys = 0;  // Ts: length of the source a source token attends over (sum Ls^2 / sum Ls)
  double tgt_keys = 0;  // Tt: length of the target a target token attends over (sum Lt^2 / sum Lt)
  double cross_keys =
      0;  // Tx: length of the source a target token attends over (sum Lt*Ls / sum Lt)
};

// From per-sentence token counts without EOS (data::Corpus::src_lengths / tgt_lengths).
LengthStats length_stats(const std::vector<int32_t>& src_lengths,
                         const std::vector<int32_t>& tgt_lengths);

// The parts, in FLOPs per target token (6 x multiply-adds: forward 1, backward 2, 2 FLOPs each).
struct ModelFlops {
  double src_dense =
      0;  // r x [Le (4 d^2 + 2 d dff) + Ld 2 d^2]: encoder, and cross-attention K/V of the memory
  double tgt_dense = 0;      // Ld (6 d^2 + 2 d dff): self-attention QKVO, cross-attention Q/O, FFN
  double output = 0;         // d V: the output projection
  double src_attention = 0;  // r x Le 2 d Ts: encoder scores and weighted sums
  double tgt_attention = 0;  // Ld 2 d (Tt + Tx): decoder self (full square, as computed) and cross
  double total() const { return src_dense + tgt_dense + output + src_attention + tgt_attention; }
};

ModelFlops model_flops(const config::ModelConfig& model, int64_t vocab_size,
                       const LengthStats& lengths);

// Several lines saying what model_flops counted, with its parts, for the benchmark's report.
std::string describe(const ModelFlops& flops, const config::ModelConfig& model, int64_t vocab_size,
                     const LengthStats& lengths);

// Dense bf16 tensor-core peak, TFLOP/s, of a GPU named in `device` ("cuda:0 (NVIDIA H100 80GB
// HBM3)"); 0 when the name is not one this table knows (then MFU is not printed).
double peak_bf16_tflops(const std::string& device);

}  // namespace tandem::bench
