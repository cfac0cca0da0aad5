// Attention on a GPU through LibTorch >= 2's fused kernels, for fused_attention (ops.h) and
// with its contract; its tensor-op path serves everything else.
#pragma once

#include <torch/torch.h>

#include "trainer/kernels/fused/attention_mask.h"

namespace tandem::kernels {

// Whether gpu_attention takes these rows: a GPU tensor, with LibTorch >= 2.
bool gpu_attention_applies(const torch::Tensor& q_rows);

// fused_attention on a GPU: self-attention (kv undefined, q_rows holding q | k | v) or
// cross-attention. TANDEM_KERNELS=aten leaves every choice of kernel to SDPA.
torch::Tensor gpu_attention(const torch::Tensor& q_rows, const torch::Tensor& kv, int64_t heads,
                            const AttentionMask& mask);

}  // namespace tandem::kernels
