// Fused autograd functions for the training hot path: multi-head attention straight from the
// projected rows (padding mask + causal flag, no materialised mask), and dropout added to a
// residual. On CPU (float, double) they are loops around BLAS; elsewhere, plain tensor ops.
#pragma once

#include <torch/torch.h>

#include "trainer/kernels/fused/attention_mask.h"

namespace tandem::kernels {

// x [..., in] · weightᵀ + bias as one matrix product over all rows: LibTorch 1.13's linear() on
// 3-d input is a matmul plus a separate bias pass, addmm fuses them.
torch::Tensor linear_rows(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias);

// softmax(q kᵀ / sqrt(d_head)) v for every head, heads side by side in the result.
// Self-attention: kv undefined, q_rows [batch, len, 3 d] holds q | k | v (a fused projection).
// Cross-attention: q_rows [batch, q_len, d], kv [batch, k_len, 2 d] holds k | v.
// → [batch, q_len, d]. A query with no visible key attends uniformly to all keys.
torch::Tensor fused_attention(const torch::Tensor& q_rows, const torch::Tensor& kv, int64_t heads,
                              const AttentionMask& mask);

// Incremental decoding's self-attention, forward only: the newest position of every row, q
// [rows, d] (rows any stride apart), attends to the first `len` positions of its own cache row,
// kv_cache [rows, capacity, 2 d] holding k | v per position. → [rows, d].
torch::Tensor cached_attention(const torch::Tensor& q, const torch::Tensor& kv_cache, int64_t len,
                               int64_t heads);

// residual + dropout(x, p); residual may be undefined (dropout alone). The keep probability is
// quantised to 1/65536 on CPU, where masks come from a fast generator seeded by torch's.
torch::Tensor dropout_add(const torch::Tensor& x, double p, bool training,
                          const torch::Tensor& residual);

}  // namespace tandem::kernels
