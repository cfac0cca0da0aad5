#include "trainer/model/layers.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <stdexcept>

#include "trainer/model/decoder_state.h"
#include "trainer/model/frozen_base.h"
#include "trainer/model/recompute.h"
#include "trainer/kernels/cuda/gpu_ops.h"

namespace tandem::model {
namespace {

// A bf16 stream (bf16_stream) stays bf16 through LayerNorm, which still sums in fp32 inside:
// autocast would widen its output to fp32, so it is kept out, and the weight and bias are cast.
// Where Tandem's CUDA kernels serve, the weight and bias gradients are their column sums, in fp32.
torch::Tensor normalize(torch::nn::LayerNorm& norm, const torch::Tensor& x) {
  if (x.scalar_type() != torch::kBFloat16 || !x.is_cuda()) return norm(x);
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  const auto& options = norm->options;
  if (kernels::own_kernels_for(x)) return kernels::layer_norm_own(x, norm->weight, norm->bias, options.eps());
  return torch::layer_norm(x, options.normalized_shape(), norm->weight.to(torch::kBFloat16),
                           norm->bias.to(torch::kBFloat16), options.eps());
}

// One sublayer with its residual connection and LayerNorm, in either order:
// post-norm x = norm(x + dropout(f(x))); pre-norm x = x + dropout(f(norm(x))). Post-norm's
// dropout, add and norm are one kernel where Tandem's serve (a bf16 stream on a GPU).
template <typename Sublayer>
torch::Tensor residual(const torch::Tensor& x, torch::nn::LayerNorm& norm,
                       const LayerOptions& options, bool training, Sublayer&& sublayer) {
  if (options.pre_norm) {
    return kernels::dropout_add(sublayer(normalize(norm, x)), options.dropout, training, x);
  }
  const auto out = sublayer(x);
  if (kernels::add_layer_norm_own_for(x, out)) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
    return kernels::add_layer_norm_own(x, out, norm->weight, norm->bias, norm->options.eps(),
                              training ? options.dropout : 0.0);
  }
  return normalize(norm, kernels::dropout_add(out, options.dropout, training, x));
}

torch::nn::LayerNorm layer_norm(int64_t d_model) {
  return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d_model}));
}

MultiheadAttention attention(const LayerOptions& options) {
  return MultiheadAttention(MultiheadAttentionOptions{options.d_model, options.heads});
}

// An encoder's or decoder's layers, registered in `stack` as "layers" (a ModuleList), and with
// pre-norm the LayerNorm that closes the stack ("final_norm").
template <typename Layer>
std::vector<Layer> stack_layers(torch::nn::Module& stack, const StackOptions& options,
                                torch::nn::LayerNorm& final_norm) {
  auto list = stack.register_module("layers", torch::nn::ModuleList());
  std::vector<Layer> layers;
  for (int64_t i = 0; i < options.layers; ++i) {
    layers.emplace_back(options.layer);
    list->push_back(layers.back());
    if (options.on_part_built) options.on_part_built(*layers.back());
  }
  if (options.layer.pre_norm) {
    final_norm = stack.register_module("final_norm", layer_norm(options.layer.d_model));
    if (options.on_part_built) options.on_part_built(*final_norm);
  }
  return layers;
}

}  // namespace

FeedForwardImpl::FeedForwardImpl(const FeedForwardOptions& options)
    : activation_(options.activation) {
  fc1 = register_module("fc1", torch::nn::Linear(options.d_model, options.d_ff));
  fc2 = register_module("fc2", torch::nn::Linear(options.d_ff, options.d_model));
  bf16_ = std::make_unique<std::pair<Bf16Linear, Bf16Linear>>(
      Bf16Linear({fc1->weight}, {fc1->bias}), Bf16Linear({fc2->weight}, {fc2->bias}));
}

const std::vector<std::string>& FeedForwardImpl::projections() {
  static const std::vector<std::string> names{"fc1", "fc2"};
  return names;
}

void FeedForwardImpl::add_adapter(const std::string& name, const AdapterOptions& options) {
  if (name != "fc1" && name != "fc2") {
    throw std::invalid_argument("the feed-forward layer has no projection '" + name + "'");
  }
  (name == "fc1" ? fc1_lora_ : fc2_lora_) = model::add_adapter(name == "fc1" ? *fc1 : *fc2, options);
}

// On [rows, d_model]. Relu runs in place on the product itself (not a view of it, which would make
// autograd copy slices): addmm's backward does not need its output. Swish's backward needs its
// input, so it writes a new tensor where autograd records, and in place where it does not.
torch::Tensor FeedForwardImpl::forward(const torch::Tensor& x) {
  if (frozen_) return frozen_forward(x);
  const bool relu = activation_ == Activation::kRelu;
  const bool adapted = fc1_lora_ || fc2_lora_;
  if (!adapted && fc1->weight.requires_grad() && bf16_linear_applies(x)) {  // relu in fc1's product
    auto& [bf16_fc1, bf16_fc2] = *bf16_;
    return bf16_fc2(relu ? bf16_fc1(x, /*relu=*/true) : torch::silu(bf16_fc1(x)));
  }
  const auto rows = x.reshape({-1, x.size(-1)});
  auto hidden = base_linear(rows, *fc1);
  hidden = with_adapters(hidden, rows, {&fc1_lora_}, {fc1->weight.size(0)}, is_training());
  if (relu) {
    hidden.relu_();
  } else if (torch::GradMode::is_enabled() && hidden.requires_grad()) {
    hidden = torch::silu(hidden);
  } else {
    torch::silu_(hidden);
  }
  auto out = base_linear(hidden, *fc2);
  return with_adapters(out, hidden, {&fc2_lora_}, {fc2->weight.size(0)}, is_training())
      .view(x.sizes());
}

// Frozen, a block of rows at a time through one hidden buffer: [kFrozenBlockRows, d_ff] stays in
// the core's L2 cache between the two products, where the encoder's 2,048-token batches would
// write and read back 8 MB of hidden layer per layer, in pages mapped afresh as batches grow. Each
// output row is its own row's sums, so the blocks do not change it.
torch::Tensor FeedForwardImpl::frozen_forward(const torch::Tensor& x) {
  const auto& [fc1_frozen, fc2_frozen] = *frozen_;
  const auto rows = x.reshape({-1, x.size(-1)});
  const int64_t n = rows.size(0);
  auto out = torch::empty(rows.sizes(), rows.options());
  auto hidden = torch::empty({std::min(n, kFrozenBlockRows), fc1->weight.size(0)}, rows.options());
  for (int64_t r0 = 0; r0 < n; r0 += kFrozenBlockRows) {
    const int64_t count = std::min(kFrozenBlockRows, n - r0);
    auto h = hidden.narrow(0, 0, count);
    fc1_frozen(rows.narrow(0, r0, count), h);
    if (activation_ == Activation::kRelu) {
      h.relu_();
    } else {
      torch::silu_(h);
    }
    fc2_frozen(h, out.narrow(0, r0, count));
  }
  return out.view(x.sizes());
}

void FeedForwardImpl::freeze(kernels::InferencePrecision precision) {
  frozen_ = std::make_shared<const std::pair<kernels::FrozenLinear, kernels::FrozenLinear>>(
      kernels::FrozenLinear(fc1->weight, fc1->bias, precision),
      kernels::FrozenLinear(fc2->weight, fc2->bias, precision));
}

EncoderLayerImpl::EncoderLayerImpl(const LayerOptions& options) : options_(options) {
  self_attn_ = register_module("self_attn", attention(options));
  self_attn_norm_ = register_module("self_attn_norm", layer_norm(options.d_model));
  ffn_ = register_module(
      "ffn", FeedForward(FeedForwardOptions{options.d_model, options.d_ff, options.activation}));
  ffn_norm_ = register_module("ffn_norm", layer_norm(options.d_model));
}

torch::Tensor EncoderLayerImpl::forward(const torch::Tensor& x, const kernels::AttentionMask& mask) {
  auto h = residual(x, self_attn_norm_, options_, is_training(),
                    [&](const torch::Tensor& y) { return self_attn_->forward(y, y, mask); });
  return residual(h, ffn_norm_, options_, is_training(),
                  [&](const torch::Tensor& y) { return ffn_(y); });
}

DecoderLayerImpl::DecoderLayerImpl(const LayerOptions& options) : options_(options) {
  self_attn_ = register_module("self_attn", attention(options));
  self_attn_norm_ = register_module("self_attn_norm", layer_norm(options.d_model));
  cross_attn_ = register_module("cross_attn", attention(options));
  cross_attn_norm_ = register_module("cross_attn_norm", layer_norm(options.d_model));
  ffn_ = register_module(
      "ffn", FeedForward(FeedForwardOptions{options.d_model, options.d_ff, options.activation}));
  ffn_norm_ = register_module("ffn_norm", layer_norm(options.d_model));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                        const kernels::AttentionMask& self_mask,
                                        const kernels::AttentionMask& cross_mask,
                                        const AlignmentHeads* readout, torch::Tensor* log_probs) {
  auto h = residual(x, self_attn_norm_, options_, is_training(),
                    [&](const torch::Tensor& y) { return self_attn_->forward(y, y, self_mask); });
  h = residual(h, cross_attn_norm_, options_, is_training(), [&](const torch::Tensor& y) {
    return cross_attn_->forward(y, memory, cross_mask, readout, log_probs);
  });
  return residual(h, ffn_norm_, options_, is_training(),
                  [&](const torch::Tensor& y) { return ffn_(y); });
}

void DecoderLayerImpl::start(const torch::Tensor& memory, LayerCache& cache) {
  cache.cross_kv = cross_attn_->project_kv(memory);
}

torch::Tensor DecoderLayerImpl::step(const torch::Tensor& x, DecoderState& state, size_t index) {
  // The newest position may attend to every cached one, so no causal mask is needed.
  auto cache = state.self_cache(index);
  auto h = residual(x, self_attn_norm_, options_, is_training(), [&](const torch::Tensor& y) {
    return self_attn_->step_self(y, cache.kv, cache.rows, state.step);
  });
  const bool read = state.readout && state.readout->layer == static_cast<int64_t>(index);
  h = residual(h, cross_attn_norm_, options_, is_training(), [&](const torch::Tensor& y) {
    return cross_attn_->step_cross(y, state.layers[index].cross_kv, state.src_pad, state.width(),
                                   read ? &*state.readout : nullptr, &state.attention);
  });
  return residual(h, ffn_norm_, options_, is_training(),
                  [&](const torch::Tensor& y) { return ffn_(y); });
}

EncoderImpl::EncoderImpl(const StackOptions& options) : recompute_(options.recompute) {
  layers_ = stack_layers<EncoderLayer>(*this, options, final_norm_);
}

// A recomputed layer runs again in the backward pass, after this call has returned: what it runs
// on is captured by value (the layer's holder, the masks).
torch::Tensor EncoderImpl::forward(const torch::Tensor& x, const kernels::AttentionMask& mask) {
  auto h = x;
  for (auto& layer : layers_) {
    if (recompute_ && is_training()) {
      h = recomputed(
          [layer, mask](const torch::Tensor& y, const torch::Tensor&) mutable {
            return layer(y, mask);
          },
          h, torch::Tensor());
    } else {
      h = layer(h, mask);
    }
  }
  return final_norm_ ? normalize(final_norm_, h) : h;
}

DecoderImpl::DecoderImpl(const StackOptions& options) : recompute_(options.recompute) {
  layers_ = stack_layers<DecoderLayer>(*this, options, final_norm_);
}

torch::Tensor DecoderImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                   const kernels::AttentionMask& self_mask,
                                   const kernels::AttentionMask& cross_mask,
                                   AttentionReadout* readout) {
  auto h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    auto& layer = layers_[i];
    const bool read = readout != nullptr && readout->heads.layer == static_cast<int64_t>(i);
    if (recompute_ && is_training() && !read) {
      h = recomputed(
          [layer, self_mask, cross_mask](const torch::Tensor& y, const torch::Tensor& m) mutable {
            return layer(y, m, self_mask, cross_mask);
          },
          h, memory);
      continue;
    }
    // A recomputed layer hands back its uses' gradients of memory as one sum; here a view per
    // layer sums them the same way before memory's gradient adds the layers up. (With adapters
    // beside cross-attention's k and v, a layer uses memory three times, and float sums grouped
    // otherwise would not be bitwise those of recomputed layers.)
    const torch::Tensor m = memory.requires_grad() ? memory.view_as(memory) : memory;
    h = layer->forward(h, m, self_mask, cross_mask, read ? &readout->heads : nullptr,
                       read ? &readout->log_probs : nullptr);
  }
  return final_norm_ ? normalize(final_norm_, h) : h;
}

void DecoderImpl::start(DecoderState& state, const torch::Tensor& memory) {
  state.layers.assign(layers_.size(), LayerCache());
  for (size_t i = 0; i < layers_.size(); ++i) {
    layers_[i]->start(memory, state.layers[i]);
  }
}

torch::Tensor DecoderImpl::step(const torch::Tensor& x, DecoderState& state) {
  auto h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i]->step(h, state, i);
  }
  return final_norm_ ? normalize(final_norm_, h) : h;
}

}  // namespace tandem::model
