#include "trainer/model/attention.h"

#include <cmath>

namespace tandem::model {
namespace {

// A large finite negative instead of -inf: a row whose keys are all masked (an all-padding
// sentence) then gets uniform weights instead of NaN, and NaN never leaks into real positions
// through 0 * NaN in the value product. exp() of it underflows to exactly 0 otherwise.
double mask_value(torch::ScalarType dtype) { return dtype == torch::kHalf ? -65504.0 : -1e30; }

}  // namespace

torch::Tensor key_padding_mask(const torch::Tensor& pad) {
  return pad.view({pad.size(0), 1, 1, pad.size(1)});
}

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options)
    : options_(options), d_head_(options.d_model / options.heads) {
  q_proj_ = register_module("q_proj", torch::nn::Linear(options.d_model, options.d_model));
  k_proj_ = register_module("k_proj", torch::nn::Linear(options.d_model, options.d_model));
  v_proj_ = register_module("v_proj", torch::nn::Linear(options.d_model, options.d_model));
  out_proj_ = register_module("out_proj", torch::nn::Linear(options.d_model, options.d_model));
}

torch::Tensor MultiheadAttentionImpl::split_heads(const torch::Tensor& x) const {
  return x.view({x.size(0), x.size(1), options_.heads, d_head_}).transpose(1, 2);
}

std::pair<torch::Tensor, torch::Tensor> MultiheadAttentionImpl::project_kv(const torch::Tensor& x) {
  return {split_heads(k_proj_(x)), split_heads(v_proj_(x))};
}

torch::Tensor MultiheadAttentionImpl::attend(const torch::Tensor& query, const torch::Tensor& k,
                                             const torch::Tensor& v, const torch::Tensor& mask) {
  // Scaling q (q_len x d) is cheaper than scaling the scores (q_len x k_len).
  auto q = split_heads(q_proj_(query) * (1.0 / std::sqrt(static_cast<double>(d_head_))));
  auto scores = torch::matmul(q, k.transpose(-2, -1));  // [batch, heads, q_len, k_len]
  if (mask.defined()) {
    scores = scores.masked_fill(mask, mask_value(scores.scalar_type()));
  }
  auto context = torch::matmul(torch::softmax(scores, -1), v);  // [batch, heads, q_len, d_head]
  // Heads back side by side: the one copy the layout change needs.
  context = context.transpose(1, 2).reshape({query.size(0), query.size(1), options_.d_model});
  return out_proj_(context);
}

// The parameters stay q_proj/k_proj/v_proj (checkpoint names); concatenating the small weights
// each call costs far less than the separate products it saves.
torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& key_value,
                                              const AttentionMask& mask) {
  torch::Tensor context;
  if (query.is_same(key_value)) {
    auto qkv = linear_rows(query, torch::cat({q_proj_->weight, k_proj_->weight, v_proj_->weight}),
                           torch::cat({q_proj_->bias, k_proj_->bias, v_proj_->bias}));
    context = fused_attention(qkv, torch::Tensor(), options_.heads, mask);
  } else {
    auto q = linear_rows(query, q_proj_->weight, q_proj_->bias);
    auto kv = linear_rows(key_value, torch::cat({k_proj_->weight, v_proj_->weight}),
                          torch::cat({k_proj_->bias, v_proj_->bias}));
    context = fused_attention(q, kv, options_.heads, mask);
  }
  return linear_rows(context, out_proj_->weight, out_proj_->bias);
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& key_value,
                                              const torch::Tensor& mask) {
  auto [k, v] = project_kv(key_value);
  return attend(query, k, v, mask);
}

}  // namespace tandem::model
