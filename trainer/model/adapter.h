// A LoRA adapter (Hu et al. 2021) beside one linear layer: y = x Wᵀ + b + s · dropout(x) Aᵀ Bᵀ,
// with A [rank, in] and B [out, rank] trained while W and b stay frozen, and s = alpha / rank.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace tandem::model {

struct AdapterOptions {
  int64_t rank = 8;
  double alpha = 16;
  double dropout = 0.0;  // on the adapter's input, in training
};

struct Adapter {
  torch::Tensor a;  // [rank, in]
  torch::Tensor b;  // [out, rank]
  double scale = 1;
  double dropout = 0;

  // x [..., in] → the adapter's term [..., out].
  torch::Tensor operator()(const torch::Tensor& x, bool training) const;
};

// Registers an adapter in `linear` as its parameters lora_a (A, uniform in ±1/sqrt(in), as
// peft's Kaiming init draws it) and lora_b (B, zeros: the layer computes what it did), and returns
// it.
Adapter add_adapter(torch::nn::LinearImpl& linear, const AdapterOptions& options);

// base [..., Σ out_i] (side-by-side products of x with the weights of parts i, out_i wide each)
// plus each part's adapter term where it has one.
torch::Tensor with_adapters(torch::Tensor base, const torch::Tensor& x,
                            const std::vector<const std::optional<Adapter>*>& parts,
                            const std::vector<int64_t>& widths, bool training);

}  // namespace tandem::model
