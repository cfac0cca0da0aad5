// The Transformer's building blocks: position-wise feed-forward, encoder and decoder layers
// (residual + LayerNorm, post-norm or pre-norm), and the encoder and decoder stacks. The output
// layer is model/output_layer.h.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/model/attention.h"

namespace tandem::model {

class DecoderState;  // decoder_state.h
struct LayerCache;   // decoder_state.h

// The feed-forward layer's nonlinearity: relu, or swish (x * sigmoid(x), also called SiLU: Marian's
// and MarianMT's).
enum class Activation { kRelu, kSwish };

struct FeedForwardOptions {
  int64_t d_model = 256;
  int64_t d_ff = 1024;
  Activation activation = Activation::kRelu;
};

// fc2(activation(fc1(x))), applied to every position alone.
class FeedForwardImpl : public torch::nn::Module {
 public:
  explicit FeedForwardImpl(const FeedForwardOptions& options);
  torch::Tensor forward(const torch::Tensor& x);  // [batch, len, d_model] → same
  // From now on fc1 and fc2 run frozen (see MultiheadAttentionImpl::freeze).
  void freeze(kernels::InferencePrecision precision);
  // LoRA: an adapter beside `name` (fc1 or fc2), from now on.
  void add_adapter(const std::string& name, const AdapterOptions& options);
  static const std::vector<std::string>& projections();  // fc1, fc2

  torch::nn::Linear fc1{nullptr}, fc2{nullptr};

 private:
  static constexpr int64_t kFrozenBlockRows = 128;  // rows per block of the frozen forward
  torch::Tensor frozen_forward(const torch::Tensor& x);

  Activation activation_;
  std::shared_ptr<const std::pair<kernels::FrozenLinear, kernels::FrozenLinear>>
      frozen_;                                               // fc1, fc2; null: not frozen
  std::unique_ptr<std::pair<Bf16Linear, Bf16Linear>> bf16_;  // fc1, fc2 in the bf16 stream
  std::optional<Adapter> fc1_lora_, fc2_lora_;                // none: no adapter
};
TORCH_MODULE(FeedForward);

// Shared by encoder and decoder layers.
struct LayerOptions {
  int64_t d_model = 256;
  int64_t heads = 4;
  int64_t d_ff = 1024;
  double dropout = 0.1;                       // on every sublayer's output, before the residual sum
  bool pre_norm = false;                      // false: x = norm(x + f(x)); true: x = x + f(norm(x))
  Activation activation = Activation::kRelu;  // the feed-forward layer's
};

class EncoderLayerImpl : public torch::nn::Module {
 public:
  explicit EncoderLayerImpl(const LayerOptions& options);
  // x [batch, src_len, d_model], mask over the source keys → like x.
  torch::Tensor forward(const torch::Tensor& x, const kernels::AttentionMask& mask);

 private:
  LayerOptions options_;
  MultiheadAttention self_attn_{nullptr};
  torch::nn::LayerNorm self_attn_norm_{nullptr};
  FeedForward ffn_{nullptr};
  torch::nn::LayerNorm ffn_norm_{nullptr};
};
TORCH_MODULE(EncoderLayer);

class DecoderLayerImpl : public torch::nn::Module {
 public:
  explicit DecoderLayerImpl(const LayerOptions& options);
  // x [batch, tgt_len, d_model], memory [batch, src_len, d_model]; self_mask over the target
  // keys (causal), cross_mask over the source keys → like x. With `readout`, *log_probs becomes
  // the log of its heads' mean cross-attention (alignment.h).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory,
                        const kernels::AttentionMask& self_mask,
                        const kernels::AttentionMask& cross_mask,
                        const AlignmentHeads* readout = nullptr,
                        torch::Tensor* log_probs = nullptr);

  // Incremental decoding. start: fills cache.cross_kv from memory [sentences, src_len, d_model].
  void start(const torch::Tensor& memory, LayerCache& cache);
  // x [rows, d_model] (the newest position of every decoder row) → [rows, d_model]; writes its
  // keys and values into layer `index` of state at position state.step.
  torch::Tensor step(const torch::Tensor& x, DecoderState& state, size_t index);

 private:
  LayerOptions options_;
  MultiheadAttention self_attn_{nullptr};
  torch::nn::LayerNorm self_attn_norm_{nullptr};
  MultiheadAttention cross_attn_{nullptr};
  torch::nn::LayerNorm cross_attn_norm_{nullptr};
  FeedForward ffn_{nullptr};
  torch::nn::LayerNorm ffn_norm_{nullptr};
};
TORCH_MODULE(DecoderLayer);

// Called on each part of a model as soon as it is built (an embedding, a layer, the output
// layer), before the next part is: see TransformerOptions::on_part_built.
using PartBuilt = std::function<void(torch::nn::Module&)>;

// A stack of identical layers; with pre-norm a final LayerNorm ("final_norm") closes it.
struct StackOptions {
  LayerOptions layer;
  int64_t layers = 3;
  PartBuilt on_part_built;  // on each layer and the final LayerNorm; none: nothing
  // Activation checkpointing: in training, each layer keeps only its input for the backward pass
  // and runs again there (recompute.h); the gradients are bitwise the same.
  bool recompute = false;
};

class EncoderImpl : public torch::nn::Module {
 public:
  explicit EncoderImpl(const StackOptions& options);
  // x [batch, src_len, d_model] (embedded), mask over the source keys → [batch, src_len, d_model].
  torch::Tensor forward(const torch::Tensor& x, const kernels::AttentionMask& mask);

 private:
  std::vector<EncoderLayer> layers_;  // registered as "layers" (a ModuleList)
  torch::nn::LayerNorm final_norm_{nullptr};
  bool recompute_ = false;
};
TORCH_MODULE(Encoder);

class DecoderImpl : public torch::nn::Module {
 public:
  explicit DecoderImpl(const StackOptions& options);
  // x [batch, tgt_len, d_model] (embedded), memory [batch, src_len, d_model]
  // → [batch, tgt_len, d_model] (before the output projection). With a readout, its layer's
  // cross-attention is read out into readout->log_probs; that layer is not recomputed (it keeps
  // its activations for the backward pass, the others as StackOptions::recompute says).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory,
                        const kernels::AttentionMask& self_mask,
                        const kernels::AttentionMask& cross_mask,
                        AttentionReadout* readout = nullptr);

  // Fills state.layers (one cache per layer) from memory [sentences, src_len, d_model].
  void start(DecoderState& state, const torch::Tensor& memory);
  // x [rows, d_model] (the embedded newest position of every decoder row) → [rows, d_model].
  torch::Tensor step(const torch::Tensor& x, DecoderState& state);

 private:
  std::vector<DecoderLayer> layers_;  // registered as "layers" (a ModuleList)
  torch::nn::LayerNorm final_norm_{nullptr};
  bool recompute_ = false;
};
TORCH_MODULE(Decoder);

}  // namespace tandem::model
