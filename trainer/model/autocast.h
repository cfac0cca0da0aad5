// bf16 autocast of the matrix products (train.precision bf16), on the CPU (oneDNN) and on CUDA:
// a scoped guard that turns it on, and the query the fused output layer asks.
#pragma once

#include <torch/torch.h>

namespace tandem::model {

// Whether autocast is on for `device`'s type in this thread.
bool autocast_enabled(const torch::Device& device);

// Whether the model's activations stay bf16 between its matrix products: under autocast on a GPU.
// The embeddings are cast once, and the residual stream, dropout, LayerNorm (which accumulates in
// fp32) and the gradients flowing back through them are bf16, so nothing is cast around each
// product. On the CPU the stream stays fp32, since its fused kernels read float.
bool bf16_stream(const torch::Device& device);

// bf16 autocast of the operations on `device`'s type while alive, when enabled (LibTorch 1.13's
// per-device calls or 2.4's device-typed ones, whichever the build has).
class AutocastGuard {
 public:
  AutocastGuard(bool enabled, const torch::Device& device);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  bool cuda_;
  bool was_enabled_ = false;
};

}  // namespace tandem::model
