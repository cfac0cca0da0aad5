// What a query may not attend to, as fused_attention (ops.h) and gpu_attention take it: a padding
// mask over keys and a causal flag, never a [q_len, k_len] tensor.
#pragma once

#include <torch/torch.h>

namespace tandem::kernels {

// What a query may not attend to, without a [q_len, k_len] tensor.
struct AttentionMask {
  torch::Tensor key_pad;  // [batch, k_len] bool, true at padding keys; undefined: no padding
  bool causal = false;    // query i sees keys j <= i only (q_len == k_len)
  // Inference (no gradients, CPU kernel): each sentence's attention computed over its keys up to
  // its last non-padding one, with the very calls it would get alone, so that its results do not
  // depend on how far its batch pads it (BLAS sums in an order that depends on the sizes). A
  // self-attention's queries past that point (padding) come out 0.
  bool per_sentence = false;

  // The same as one bool tensor, true where forbidden, broadcastable to [batch, heads, q_len,
  // k_len]; undefined when nothing is masked. For the tensor-op path.
  torch::Tensor dense(int64_t q_len, const torch::Device& device) const;
};

}  // namespace tandem::kernels
