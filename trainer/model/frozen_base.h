// A LoRA base's frozen weight matrices as the layers hold them (float32, bf16, or int8 with one
// scale per row), and the products that compute with them in the activations' type without
// keeping a widened copy across the step.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>

namespace tandem::model {

// How a frozen base's weight matrices (the embeddings' and the linear layers') are held: bf16 at
// 2 bytes a parameter, int8 at 1 (and a float32 scale a row), quantized as Tandem's int8
// decoding holds them (kernels::quantize_rows). Biases and norms stay in float32.
enum class HeldAs { kFp32, kBf16, kInt8 };

// A weight as its layer holds it: the parameter, and where that is int8, each row's scale
// (value ≈ int8 · scale), kept as the layer's buffer "<name>_scale".
struct HeldWeight {
  torch::Tensor values;  // [rows, cols]
  torch::Tensor scales;  // [rows] float32 where values are int8; else undefined

  // Whether computing with it in `type` takes a copy: a frozen weight held in another type.
  bool widened_for(torch::ScalarType type) const;
  // Rows begin..begin + n of it.
  HeldWeight rows(int64_t begin, int64_t n) const;
  // Its values in `type`: the parameter itself where held in that type (so its gradient flows),
  // else a copy, widened or, from int8, q · scale computed in float32.
  torch::Tensor as(torch::ScalarType type) const;
  // The scales as an input of a custom autograd function (where a tensor may be optional, not
  // undefined).
  c10::optional<torch::Tensor> scales_input() const;
  // Its rows `ids` ([...] int64 → [..., cols]), an embedding lookup: int8 rows times their
  // scales in float32, else the rows as held.
  torch::Tensor lookup(const torch::Tensor& ids) const;
};

// `weight`, the parameter "weight" of `layer`, as held: with its scales where it is int8 (looked
// up only then, so that the float32 and bf16 paths of every step pay nothing for it).
HeldWeight held_weight(const torch::nn::Module& layer, const torch::Tensor& weight);

// Freezes the parameter `name` of `layer` and sets it to `value` (float32) held `as` says; a
// 1-dimensional one (a bias, a norm) stays float32. It may be hollow (model::hollow_parameters).
void hold_frozen(torch::nn::Module& layer, const std::string& name, const torch::Tensor& value,
                 HeldAs as);

// The weight a linear layer computes with on x: the stored one, or a copy in x's type where the
// weight is held in another (a frozen bf16 base under float32 activations).
torch::Tensor weight_for(const torch::Tensor& weight, const torch::Tensor& x);

// x Wᵀ + b (kernels::linear_rows). A frozen weight held in another type than x is widened (or
// dequantized) for the product and again for the backward pass, which keeps the weight as held,
// not the widened copy: a bf16 or int8 base's layers never hold float32 copies of their weights
// across a step.
torch::Tensor base_linear(const torch::Tensor& x, const HeldWeight& weight,
                          const torch::Tensor& bias);
// The same with a linear layer's weight and bias.
torch::Tensor base_linear(const torch::Tensor& x, const torch::nn::LinearImpl& layer);

}  // namespace tandem::model
