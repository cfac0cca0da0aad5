// Incremental decoding's attention, forward only: one new position per decoder row attends to keys
// and values already in memory (its self-attention cache, or its sentence's encoder side).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace tandem::kernels {

// Incremental decoding's attention, forward only: one new position per decoder row attends to
// keys and values already laid out in memory (the self-attention cache of its own row, or the
// encoder side of its sentence). On x86 CPUs with AVX2 and FMA, float, heads of a multiple of 8
// columns: a loop over the positions in memory order, every head of a position at once, 8 keys'
// dot products at a time, the rows that share their keys (a sentence's hypotheses on its encoder
// side) up to 4 together, and padded positions left out. A BLAS call per row and head (the other
// path) costs more in its set-up than in its arithmetic at these sizes: scores of 4-100 keys of 64
// columns.

// Row r of q [rows, d] (heads side by side, rows any stride apart) attends to the first `len`
// positions of kv [groups, capacity, 2 d] group r / width, each position k | v, except those
// where pad [groups, >= len] (bool) is true; pad undefined: none. A row whose `len` keys are all
// padding attends uniformly to them. With cache_rows [rows, >= len] int32 (width 1), row r's
// position j is at kv[cache_rows[r][j], j] instead. → [rows, d].
// Self-attention: kv is the cache, one group per row (width 1). Cross-attention: kv the encoder
// side, `width` consecutive rows (a sentence's hypotheses) per group.
torch::Tensor step_attention(const torch::Tensor& q, const torch::Tensor& kv, int64_t len,
                             int64_t width, const torch::Tensor& pad, int64_t heads,
                             const torch::Tensor& cache_rows = {});

// Attention of every query to its sentence's keys, forward only, each query row on its own: its
// bits are those it gets alone, whatever its batch holds and however far the batch pads it (int8
// inference's batch invariance; AttentionMask::per_sentence is the same for the other path).
// q [batch, q_len, d] (rows any stride apart: the q of a q | k | v product), kv [batch, k_len,
// 2 d] (k | v per position, positions any stride apart), pad [batch, k_len] bool or undefined.
// → [batch, q_len, d]. On the CPUs step_attention's loop serves, each sentence's queries its
// width; elsewhere fused_attention per sentence.
torch::Tensor row_attention(const torch::Tensor& q, const torch::Tensor& kv,
                            const torch::Tensor& pad, int64_t heads);

}  // namespace tandem::kernels
