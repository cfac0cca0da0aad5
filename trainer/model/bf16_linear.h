// Linear layers of the bf16 stream that keep their weights as bf16 copies made once per update of
// the fp32 parameters, and hand fp32 gradients straight back to them.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

namespace tandem::model {

// Under bf16 autocast every use of a weight casts it (and its gradient back): per linear layer and
// micro-batch, a cast of the weight and one of the bias forward, and casts of both gradients
// backward, each a kernel launch. Here the fp32 parameters stay the masters (the optimizer,
// checkpoints and the CPU see only them), bf16 copies are made again only after a parameter
// changed, and the backward pass writes fp32 gradients directly: the weight's from a matrix product
// with an fp32 result, the bias's from fp32 column sums.

// A bf16 copy of fp32 tensors (groups of parts, each group concatenated along the first
// dimension), made again by one multi-tensor copy when a part changed since the last (its version
// counter, its storage or its device), and not otherwise.
class Bf16Copy {
 public:
  explicit Bf16Copy(std::vector<std::vector<torch::Tensor>> groups);

  // One bf16 tensor per group, current.
  const std::vector<torch::Tensor>& get();
  // Times the copy has been made (for tests).
  int64_t copies_made() const { return copies_made_; }

 private:
  bool stale() const;
  void allocate();
  void remake();

  std::vector<std::vector<torch::Tensor>> groups_;
  std::vector<torch::Tensor> parts_;   // every group's parts, in order
  std::vector<torch::Tensor> slices_;  // each part's rows in its group's copy
  std::vector<torch::Tensor> copies_;
  std::vector<int64_t> versions_;     // of each part when last copied
  std::vector<const void*> storage_;  // each part's data when last copied
  int64_t copies_made_ = 0;
};

// A linear layer (or several side by side: their weights stacked along the output dimension) in
// the bf16 stream: y = x · Wᵀ + b, optionally relu(y), from the bf16 copies of W and b; the
// gradients reach each part's fp32 weight and bias.
class Bf16Linear {
 public:
  Bf16Linear(std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases);

  // x [..., in] bf16 → [..., Σ out] bf16.
  torch::Tensor operator()(const torch::Tensor& x, bool relu = false);

  const Bf16Copy& copy() const { return copy_; }

 private:
  std::vector<torch::Tensor> weights_, biases_;
  Bf16Copy copy_;
};

// Whether a training product on x goes through Bf16Linear: x is bf16 on a GPU, gradients are
// recorded, and Tandem's own kernels serve (TANDEM_KERNELS=aten turns this off too, for A/B runs).
bool bf16_linear_applies(const torch::Tensor& x);

}  // namespace tandem::model
