#include "trainer/optim/multi_tensor.h"

namespace tandem::optim {

std::vector<torch::Tensor> gradients(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  grads.reserve(params.size());
  for (const torch::Tensor& param : params) grads.push_back(param.grad());
  return grads;
}

bool all_on_gpu(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return false;
  for (const auto& t : tensors) {
    if (!t.defined() || !t.is_cuda()) return false;
  }
  return true;
}

double sum_of_squares(const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return 0.0;
  torch::NoGradGuard no_grad;
  const auto norms = at::_foreach_norm(tensors, 2);
  return at::stack(norms).to(torch::kFloat64).square().sum().item<double>();
}

void adam_update(std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                 std::vector<torch::Tensor>& exp_avg, std::vector<torch::Tensor>& exp_avg_sq,
                 double beta1, double beta2, double eps, double lr, double correction1,
                 double correction2) {
  torch::NoGradGuard no_grad;
  at::_foreach_mul_(exp_avg, beta1);
  at::_foreach_add_(exp_avg, grads, 1.0 - beta1);
  at::_foreach_mul_(exp_avg_sq, beta2);
  at::_foreach_addcmul_(exp_avg_sq, grads, grads, 1.0 - beta2);
  auto denominator = at::_foreach_div(exp_avg_sq, correction2);
  at::_foreach_sqrt_(denominator);
  at::_foreach_add_(denominator, eps);
  at::_foreach_addcdiv_(params, exp_avg, denominator, -lr / correction1);
}

}  // namespace tandem::optim
