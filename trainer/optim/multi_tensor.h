// The optimizer's arithmetic on GPU tensors as multi-tensor operations (at::_foreach_*): a few
// kernel launches per step for all parameters, instead of several per parameter, whose launch
// cost dominates a step on a GPU. Same formulas as the per-tensor code in adam.cpp.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace tandem::optim {

// The .grad() of each parameter, in order (undefined where a parameter has none yet).
std::vector<torch::Tensor> gradients(const std::vector<torch::Tensor>& params);

// True when every tensor is defined and on a GPU (then the functions below apply).
bool all_on_gpu(const std::vector<torch::Tensor>& tensors);

// Σ x² over all tensors, accumulated in float32 per tensor and float64 across them; one host sync.
double sum_of_squares(const std::vector<torch::Tensor>& tensors);

// Adam with bias correction, in place: m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
// p -= (lr / correction1) m / (sqrt(v / correction2) + eps).
void adam_update(std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                 std::vector<torch::Tensor>& exp_avg, std::vector<torch::Tensor>& exp_avg_sq,
                 double beta1, double beta2, double eps, double lr, double correction1,
                 double correction2);

}  // namespace tandem::optim
