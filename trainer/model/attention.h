// Multi-head scaled dot-product attention with q/k/v/out projections (q, k and v computed by one
// fused matrix product when training), the masks it takes (padding keys, causal future) and the
// key/value split that incremental decoding caches.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "trainer/model/kernels.h"

namespace tandem::model {

struct MultiheadAttentionOptions {
  int64_t d_model = 256;
  int64_t heads = 4;  // must divide d_model
};

// Masks are bool, true where attention is forbidden, broadcastable to [batch, heads, q_len, k_len].
// pad [batch, k_len] (true at padding) → [batch, 1, 1, k_len].
torch::Tensor key_padding_mask(const torch::Tensor& pad);

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);

  // query [batch, q_len, d_model] attends to key_value [batch, k_len, d_model] → [batch, q_len,
  // d_model]. Self-attention when key_value is query (the same tensor): one fused q|k|v product.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const AttentionMask& mask);
  // The same with a materialised bool mask (may be undefined: attend everywhere).
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const torch::Tensor& mask);

  // x [batch, len, d_model] → keys and values [batch, heads, len, d_head] (what decoding caches).
  std::pair<torch::Tensor, torch::Tensor> project_kv(const torch::Tensor& x);
  // query [batch, q_len, d_model] against already projected keys/values → [batch, q_len, d_model].
  torch::Tensor attend(const torch::Tensor& query, const torch::Tensor& k, const torch::Tensor& v,
                       const torch::Tensor& mask);

 private:
  // [batch, len, d_model] → [batch, heads, len, d_head] (a view, no copy).
  torch::Tensor split_heads(const torch::Tensor& x) const;

  MultiheadAttentionOptions options_;
  int64_t d_head_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, out_proj_{nullptr};
};
TORCH_MODULE(MultiheadAttention);

}  // namespace tandem::model
