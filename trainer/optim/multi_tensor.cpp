#include "trainer/optim/multi_tensor.h"

#include <torch/csrc/autograd/variable.h>

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

torch::Tensor sum_of_squares(const std::vector<torch::Tensor>& tensors) {
  torch::NoGradGuard no_grad;
  const auto norms = at::_foreach_norm(tensors, 2);
  return at::stack(norms).to(torch::kFloat64).square().sum();
}

void adam_masked_update(std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                        std::vector<torch::Tensor>& exp_avg, std::vector<torch::Tensor>& exp_avg_sq,
                        torch::Tensor& step, const AdamUpdate& u) {
  torch::NoGradGuard no_grad;
  const torch::Tensor take = u.finite.to(torch::kFloat64);
  step.add_(take.to(step.scalar_type()));
  // Corrections of the count after this step; at least 1 so a skipped first step divides by
  // nothing that is zero (its step size is 0 anyway).
  const torch::Tensor t = step.to(torch::kFloat64).clamp_min(1.0);
  const torch::Tensor correction1 = 1.0 - torch::pow(u.beta1, t);
  const torch::Tensor correction2 = 1.0 - torch::pow(u.beta2, t);
  const torch::Tensor step_size = take * u.lr / correction1;
  // The scalars in the parameters' dtype (lerp wants its weight in the tensor's own); a parameter
  // of another dtype converts them again (to() returns the tensor itself where it matches).
  const torch::ScalarType type = params.empty() ? torch::kFloat : params.front().scalar_type();
  const torch::Tensor scale = u.scale.to(type), w1 = (take * (1.0 - u.beta1)).to(type),
                      w2 = (take * (1.0 - u.beta2)).to(type), c2 = correction2.to(type),
                      size = step_size.to(type);
  for (size_t i = 0; i < params.size(); ++i) {
    if (!grads[i].defined()) continue;
    const auto as_param = [&](const torch::Tensor& x) { return x.to(params[i].scalar_type()); };
    // A skipped step's gradients may hold NaN or infinity; its weights are 0 and g is 0 too.
    const torch::Tensor g = grads[i].mul(as_param(scale)).nan_to_num_(0.0, 0.0, 0.0);
    exp_avg[i].lerp_(g, as_param(w1));
    exp_avg_sq[i].lerp_(g.square(), as_param(w2));
    const torch::Tensor denominator = exp_avg_sq[i].div(as_param(c2)).sqrt_().add_(u.eps);
    params[i].sub_(exp_avg[i].div(denominator).mul_(as_param(size)));
  }
}

bool fused_adam_update(std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                       std::vector<torch::Tensor>& exp_avg, std::vector<torch::Tensor>& exp_avg_sq,
                       torch::Tensor& step, const AdamUpdate& u) {
#if TORCH_VERSION_MAJOR >= 2
  if (!all_on_gpu(params) || !all_on_gpu(grads) || !step.is_cuda()) return false;
  torch::NoGradGuard no_grad;
  step.add_(u.finite.to(torch::kFloat32));
  // The kernel divides gradients by grad_scale and returns early where found_inf is 1; it reads
  // each parameter's count from state_steps (here the one shared count, read only).
  const torch::Tensor grad_scale = u.scale.reciprocal().to(torch::kFloat32);
  const torch::Tensor found_inf = u.finite.logical_not().to(torch::kFloat32);
  const std::vector<torch::Tensor> steps(params.size(), step);
  at::_fused_adam_(params, grads, exp_avg, exp_avg_sq, /*max_exp_avg_sqs=*/{}, steps, u.lr, u.beta1,
                   u.beta2, /*weight_decay=*/0.0, u.eps, /*amsgrad=*/false,
                   /*maximize=*/false, grad_scale, found_inf);
  // The fused kernel writes the parameters without counting the write in their version counters
  // (LibTorch 2.11 as much as 2.1), and those counters are how what is derived from a parameter
  // learns that it changed (model::Bf16Copy's bf16 weights): count it here.
  for (const auto& param : params) torch::autograd::impl::bump_version(param);
  return true;
#else
  (void)params, (void)grads, (void)exp_avg, (void)exp_avg_sq, (void)step, (void)u;
  return false;
#endif
}

}  // namespace tandem::optim
