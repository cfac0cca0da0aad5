#include "trainer/optim/ema.h"

#include <algorithm>
#include <stdexcept>

#include "trainer/kernels/cuda/gpu_ops.h"

// Multi-tensor arithmetic with a device tensor as the factor (_foreach_mul_.Tensor): LibTorch 2.1 on.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define TANDEM_FOREACH_TENSOR_FACTOR 1
#endif

namespace tandem::optim {

Ema::Ema(const NamedTensors& params, double decay) : decay_(decay) {
  if (!(decay > 0 && decay < 1)) {
    throw std::invalid_argument("EMA decay must be in (0, 1), got " + std::to_string(decay));
  }
  torch::NoGradGuard no_grad;
  for (const auto& [name, p] : params) {
    params_.emplace_back(name, p);
    averages_.emplace_back(name, p.detach().to(torch::kFloat32, /*non_blocking=*/false,
                                               /*copy=*/true));
  }
}

double Ema::decay_at(double decay, int64_t step) {
  return std::min(decay, (1.0 + static_cast<double>(step)) / (10.0 + static_cast<double>(step)));
}

void Ema::update(int64_t step, const torch::Tensor& take) {
  if (averages_.empty()) return;
  torch::NoGradGuard no_grad;
  // A 0-dim weight on the averages' device: (1 - d) where taken, 0 (no change) where not.
  const torch::Tensor weight =
      take.to(averages_.front().second.device(), torch::kFloat32).mul(1.0 - decay_at(decay_, step));
#ifdef TANDEM_FOREACH_TENSOR_FACTOR
  // On a GPU: average += weight · (parameter − average) in three multi-tensor operations for all
  // parameters (a lerp per parameter was a kernel launch each, ~260 a step for the base model).
  if (weight.is_cuda()) {
    std::vector<torch::Tensor> averages, params;
    for (size_t i = 0; i < params_.size(); ++i) {
      averages.push_back(averages_[i].second);
      params.push_back(params_[i].second.detach().to(torch::kFloat32));
    }
    if (kernels::own_list_kernels_for(params) && kernels::own_list_kernels_for(averages)) {
      kernels::moving_average_(averages, params, weight);  // one launch for every parameter
      return;
    }
    auto moves = at::_foreach_sub(params, averages);
    at::_foreach_mul_(moves, weight);
    at::_foreach_add_(averages, moves);
    return;
  }
#endif
  for (size_t i = 0; i < params_.size(); ++i) {
    averages_[i].second.lerp_(params_[i].second.detach().to(torch::kFloat32), weight);
  }
}

void Ema::update(int64_t step) {
  if (averages_.empty()) return;
  update(
      step,
      torch::ones({}, torch::TensorOptions(averages_.front().second.device()).dtype(torch::kBool)));
}

void Ema::reset() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) averages_[i].second.copy_(params_[i].second);
}

void Ema::swap_with_parameters() {
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& p = params_[i].second;
    torch::Tensor& average = averages_[i].second;
    const torch::Tensor held = p.detach().clone();
    p.copy_(average);
    average.copy_(held);
  }
}

}  // namespace tandem::optim
