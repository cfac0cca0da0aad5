#include "trainer/model/attention.h"

#include <algorithm>
#include <stdexcept>

#include "trainer/kernels/cpu/step_attention.h"
#include "trainer/model/frozen_base.h"

namespace tandem::model {

MultiheadAttentionImpl::MultiheadAttentionImpl(const MultiheadAttentionOptions& options)
    : options_(options) {
  q_proj_ = register_module("q_proj", torch::nn::Linear(options.d_model, options.d_model));
  k_proj_ = register_module("k_proj", torch::nn::Linear(options.d_model, options.d_model));
  v_proj_ = register_module("v_proj", torch::nn::Linear(options.d_model, options.d_model));
  out_proj_ = register_module("out_proj", torch::nn::Linear(options.d_model, options.d_model));
  const auto &q = q_proj_, &k = k_proj_, &v = v_proj_, &out = out_proj_;
  bf16_ = std::make_unique<Bf16Projections>(Bf16Projections{
      Bf16Linear({q->weight, k->weight, v->weight}, {q->bias, k->bias, v->bias}),
      Bf16Linear({q->weight}, {q->bias}), Bf16Linear({k->weight, v->weight}, {k->bias, v->bias}),
      Bf16Linear({out->weight}, {out->bias})});
}

const std::vector<std::string>& MultiheadAttentionImpl::projections() {
  static const std::vector<std::string> names{"q_proj", "k_proj", "v_proj", "out_proj"};
  return names;
}

void MultiheadAttentionImpl::add_adapter(const std::string& name, const AdapterOptions& options) {
  const auto& names = projections();
  const size_t i = std::find(names.begin(), names.end(), name) - names.begin();
  if (i == names.size()) throw std::invalid_argument("attention has no projection '" + name + "'");
  torch::nn::Linear* linears[] = {&q_proj_, &k_proj_, &v_proj_, &out_proj_};
  lora_[i] = model::add_adapter(**linears[i], options);
}

bool MultiheadAttentionImpl::bf16_path(const torch::Tensor& x) const {
  for (const auto& adapter : lora_) {
    if (adapter) return false;
  }
  return q_proj_->weight.requires_grad() && bf16_linear_applies(x);
}

namespace {

// x times the parts' weights side by side (q | k | v, k | v): one product of the concatenated
// weights, or one per part where they are a frozen base held in another type than x (no widened
// concatenation kept for the backward pass: base_linear).
torch::Tensor side_by_side(const torch::Tensor& x, std::initializer_list<torch::nn::Linear> parts) {
  const auto& first = parts.begin()->ptr()->weight;
  if (first.scalar_type() != x.scalar_type() && !first.requires_grad()) {
    std::vector<torch::Tensor> products;
    for (const auto& part : parts) products.push_back(base_linear(x, *part));
    return torch::cat(products, -1);
  }
  std::vector<torch::Tensor> weights, biases;
  for (const auto& part : parts) {
    weights.push_back(part->weight);
    biases.push_back(part->bias);
  }
  return kernels::linear_rows(x, torch::cat(weights), torch::cat(biases));
}

}  // namespace

// The parameters stay q_proj/k_proj/v_proj (checkpoint names); concatenating the small weights
// each call costs far less than the separate products it saves. Adapters add their terms to the
// fused product's parts.
torch::Tensor MultiheadAttentionImpl::project_qkv(const torch::Tensor& x) {
  if (frozen_) return frozen_->qkv(x);
  if (bf16_path(x)) return bf16_->qkv(x);
  const int64_t d = options_.d_model;
  const auto base = side_by_side(x, {q_proj_, k_proj_, v_proj_});
  return with_adapters(base, x, {&lora_[0], &lora_[1], &lora_[2]}, {d, d, d}, is_training());
}

torch::Tensor MultiheadAttentionImpl::project_kv(const torch::Tensor& memory) {
  if (frozen_) return frozen_->kv(memory);
  if (bf16_path(memory)) return bf16_->kv(memory);
  const int64_t d = options_.d_model;
  const auto base = side_by_side(memory, {k_proj_, v_proj_});
  return with_adapters(base, memory, {&lora_[1], &lora_[2]}, {d, d}, is_training());
}

torch::Tensor MultiheadAttentionImpl::project_q(const torch::Tensor& x) {
  if (frozen_) return frozen_->q(x);
  if (bf16_path(x)) return bf16_->q(x);
  const auto base = base_linear(x, *q_proj_);
  return with_adapters(base, x, {&lora_[0]}, {options_.d_model}, is_training());
}

torch::Tensor MultiheadAttentionImpl::project_out(const torch::Tensor& context) {
  if (frozen_) return frozen_->out(context);
  if (bf16_path(context)) return bf16_->out(context);
  const auto base = base_linear(context, *out_proj_);
  return with_adapters(base, context, {&lora_[3]}, {options_.d_model}, is_training());
}

void MultiheadAttentionImpl::freeze(kernels::InferencePrecision precision) {
  frozen_ = std::make_shared<const FrozenProjections>(FrozenProjections{
      kernels::FrozenLinear(torch::cat({q_proj_->weight, k_proj_->weight, v_proj_->weight}),
                            torch::cat({q_proj_->bias, k_proj_->bias, v_proj_->bias}), precision),
      kernels::FrozenLinear(q_proj_->weight, q_proj_->bias, precision),
      kernels::FrozenLinear(torch::cat({k_proj_->weight, v_proj_->weight}),
                            torch::cat({k_proj_->bias, v_proj_->bias}), precision),
      kernels::FrozenLinear(out_proj_->weight, out_proj_->bias, precision)});
  batch_invariant_ = precision == kernels::InferencePrecision::kInt8;
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& query,
                                              const torch::Tensor& key_value,
                                              const kernels::AttentionMask& given,
                                              const AlignmentHeads* readout,
                                              torch::Tensor* log_probs) {
  if (readout != nullptr) return read_out(query, key_value, given, *readout, *log_probs);
  if (batch_invariant_ && !given.causal) return project_out(row_attention(query, key_value, given));
  kernels::AttentionMask mask = given;
  mask.per_sentence = mask.per_sentence || batch_invariant_;
  const auto context =
      query.is_same(key_value)
          ? kernels::fused_attention(project_qkv(query), torch::Tensor(), options_.heads, mask)
          : kernels::fused_attention(project_q(query), project_kv(key_value), options_.heads, mask);
  return project_out(context);
}

// The projections once, for the attention and for the read-out heads.
torch::Tensor MultiheadAttentionImpl::read_out(const torch::Tensor& query,
                                               const torch::Tensor& key_value,
                                               const kernels::AttentionMask& given,
                                               const AlignmentHeads& readout,
                                               torch::Tensor& log_probs) {
  if (query.is_same(key_value) || given.causal) {
    throw std::invalid_argument("attention read-out: cross-attention only");
  }
  const int64_t d = options_.d_model;
  const auto q = project_q(query);
  const auto kv = project_kv(key_value);
  log_probs = mean_attention_log_probs(q, kv.narrow(2, 0, d), given.key_pad, options_.heads,
                                       readout);
  if (batch_invariant_) {
    return project_out(kernels::row_attention(q, kv, given.key_pad, options_.heads));
  }
  return project_out(kernels::fused_attention(q, kv, options_.heads, given));
}

torch::Tensor MultiheadAttentionImpl::row_attention(const torch::Tensor& query,
                                                    const torch::Tensor& key_value,
                                                    const kernels::AttentionMask& mask) {
  const int64_t d = options_.d_model;
  if (query.is_same(key_value)) {
    const auto qkv = project_qkv(query);  // [batch, len, 3 d]
    return kernels::row_attention(qkv.narrow(2, 0, d), qkv.narrow(2, d, 2 * d), mask.key_pad,
                                  options_.heads);
  }
  return kernels::row_attention(project_q(query), project_kv(key_value), mask.key_pad,
                                options_.heads);
}

torch::Tensor MultiheadAttentionImpl::step_self(const torch::Tensor& x, const torch::Tensor& cache,
                                                const torch::Tensor& cache_rows, int64_t len) {
  const int64_t d = options_.d_model;
  const auto qkv = project_qkv(x);  // [rows, 3 d]
  cache.narrow(0, 0, qkv.size(0)).select(1, len).copy_(qkv.narrow(1, d, 2 * d));
  const auto context = kernels::step_attention(qkv.narrow(1, 0, d), cache, len + 1, 1,
                                               torch::Tensor(), options_.heads, cache_rows);
  return project_out(context);
}

torch::Tensor MultiheadAttentionImpl::step_cross(const torch::Tensor& x, const torch::Tensor& kv,
                                                 const torch::Tensor& pad, int64_t width,
                                                 const AlignmentHeads* readout,
                                                 torch::Tensor* log_probs) {
  const auto q = project_q(x);
  if (readout != nullptr) {  // a sentence's `width` rows are its queries
    const int64_t d = options_.d_model, sentences = kv.size(0);
    *log_probs = mean_attention_log_probs(q.view({sentences, -1, d}), kv.narrow(2, 0, d), pad,
                                          options_.heads, *readout)
                     .view({q.size(0), kv.size(1)});
  }
  return project_out(kernels::step_attention(q, kv, kv.size(1), width, pad, options_.heads));
}

}  // namespace tandem::model
