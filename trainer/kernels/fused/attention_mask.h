// What a query may not attend to, as fused_attention (ops.h) and gpu_attention take it: a padding
// mask over keys and a causal flag, never a [q_len, k_len] tensor.
#pragma once

#include <torch/torch.h>

namespace tandem::kernels {

// What a query may not attend to, without a [q_len, k_len] tensor.
struct AttentionMask {
  torch::Tensor key_pad;  // [batch, k_len] bool, true at padding keys; undefined: no padding
  bool causal = false;    // query i sees keys j <= i only (q_len == k_len)

  // The same as one bool tensor, true where forbidden, broadcastable to [batch, heads, q_len,
  // k_len]; undefined when nothing is masked. For the tensor-op path.
  torch::Tensor dense(int64_t q_len, const torch::Device& device) const;
};

}  // namespace tandem::kernels
