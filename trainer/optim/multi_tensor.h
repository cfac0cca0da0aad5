// The optimizer's arithmetic as multi-tensor and fused operations that read their decisions (clip
// factor, skip) from device tensors, so a GPU step never waits for the GPU.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace tandem::optim {

// The optimizer's arithmetic as tensor operations that take their decisions (clip factor, skip)
// from tensors on the device instead of host numbers, so a GPU step never waits for the GPU:
// multi-tensor operations (at::_foreach_*) and fused Adam where LibTorch has them, a few kernel
// launches per step for all parameters. Same formulas as the CPU loop in adam.cpp.

// The .grad() of each parameter, in order (undefined where a parameter has none yet).
std::vector<torch::Tensor> gradients(const std::vector<torch::Tensor>& params);

// True when every tensor is defined and on a GPU (then the multi-tensor operations apply).
bool all_on_gpu(const std::vector<torch::Tensor>& tensors);

// Σ x² over all tensors on a GPU, accumulated in float32 per tensor and float64 across them: a
// float64 0-dim tensor on their device, not read.
torch::Tensor sum_of_squares(const std::vector<torch::Tensor>& tensors);

struct AdamUpdate {
  double beta1, beta2, eps, lr;
  torch::Tensor scale;   // 0-dim: gradients are multiplied by it (clipping)
  torch::Tensor finite;  // 0-dim bool: false leaves every tensor below (and the count) unchanged
};

// Adam with bias correction, in place, on any device, decided by the tensors in `u`:
// t += finite; g = scale·grad; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
// p -= (lr / (1 - b1^t)) m / (sqrt(v / (1 - b2^t)) + eps), as lerps and products weighted by
// `finite`, so a skipped step (NaN gradients included) changes nothing. Parameters whose gradient
// is undefined are left alone. `step` is the float32 0-dim update count.
void adam_masked_update(std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                        std::vector<torch::Tensor>& exp_avg, std::vector<torch::Tensor>& exp_avg_sq,
                        torch::Tensor& step, const AdamUpdate& u);

// The same through LibTorch's fused Adam kernel (one launch per group of tensors), where it
// exists: LibTorch >= 2 and every tensor on a GPU. Returns false, doing nothing, elsewhere. Like
// every other update, it advances each parameter's version counter.
bool fused_adam_update(std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                       std::vector<torch::Tensor>& exp_avg, std::vector<torch::Tensor>& exp_avg_sq,
                       torch::Tensor& step, const AdamUpdate& u);

}  // namespace tandem::optim
