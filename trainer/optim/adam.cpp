// Adam with bias correction, written with in-place tensor ops so the update allocates only the
// denominator; state is held per named parameter in the order given, for bit-exact checkpoints.
#include "trainer/optim/adam.h"

#include <cmath>
#include <stdexcept>

namespace tandem::optim {
namespace {

std::string shape_text(const torch::Tensor& t) {
  std::string text = "[";
  for (int64_t i = 0; i < t.dim(); ++i) text += (i > 0 ? ", " : "") + std::to_string(t.size(i));
  return text + "]";
}

// The tensor saved for `name` in one state group; throws naming the group and parameter.
const torch::Tensor& find_state(const std::vector<std::pair<std::string, torch::Tensor>>& group,
                                const std::string& group_name, const std::string& name,
                                const torch::Tensor& like) {
  for (const auto& [saved_name, tensor] : group) {
    if (saved_name != name) continue;
    if (!tensor.sizes().equals(like.sizes())) {
      throw std::invalid_argument("optimizer state " + group_name + "/" + name + ": shape " +
                                  shape_text(tensor) + ", expected " + shape_text(like));
    }
    return tensor;
  }
  throw std::invalid_argument("optimizer state " + group_name + ": parameter " + name +
                              " is missing");
}

}  // namespace

Adam::Adam(std::vector<std::pair<std::string, torch::Tensor>> named_params, AdamOptions options)
    : params_(std::move(named_params)), options_(options) {
  torch::NoGradGuard no_grad;
  for (const auto& [name, param] : params_) {
    exp_avg_.push_back(torch::zeros_like(param, torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(torch::zeros_like(param, torch::MemoryFormat::Contiguous));
  }
}

// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) +
// eps)
void Adam::step(double lr) {
  torch::NoGradGuard no_grad;
  ++step_;
  const double correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(step_));
  const double correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(step_));
  for (size_t i = 0; i < params_.size(); ++i) {
    torch::Tensor& param = params_[i].second;
    if (!param.grad().defined()) continue;
    torch::Tensor grad = param.grad();
    if (options_.weight_decay != 0.0) grad = grad.add(param, options_.weight_decay);
    exp_avg_[i].mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    exp_avg_sq_[i].mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    const torch::Tensor denominator = exp_avg_sq_[i].div(correction2).sqrt_().add_(options_.eps);
    param.addcdiv_(exp_avg_[i], denominator, -lr / correction1);
  }
}

void Adam::zero_grad() {
  torch::NoGradGuard no_grad;
  for (auto& [name, param] : params_) {
    if (param.grad().defined()) param.mutable_grad().zero_();
  }
}

// The live buffers, not copies: a checkpoint writer reads them before the next step().
std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> Adam::state() const {
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> state;
  auto& exp_avg = state["exp_avg"];
  auto& exp_avg_sq = state["exp_avg_sq"];
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg.emplace_back(params_[i].first, exp_avg_[i]);
    exp_avg_sq.emplace_back(params_[i].first, exp_avg_sq_[i]);
  }
  return state;
}

void Adam::load_state(
    const std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>>& state,
    int64_t step) {
  if (step < 0)
    throw std::invalid_argument("optimizer state: step " + std::to_string(step) + " < 0");
  for (const auto& [group_name, group] : state) {
    if (group_name != "exp_avg" && group_name != "exp_avg_sq") {
      throw std::invalid_argument("optimizer state: unknown group " + group_name +
                                  " (Adam has exp_avg and exp_avg_sq)");
    }
    if (group.size() != params_.size()) {
      throw std::invalid_argument("optimizer state " + group_name + ": " +
                                  std::to_string(group.size()) + " parameters, the model has " +
                                  std::to_string(params_.size()));
    }
  }
  for (const char* group_name : {"exp_avg", "exp_avg_sq"}) {
    if (state.count(group_name) == 0) {
      throw std::invalid_argument(std::string("optimizer state: group ") + group_name +
                                  " is missing");
    }
  }
  // Everything is checked before anything is copied, so a failed load leaves the optimizer as it
  // was.
  std::vector<const torch::Tensor*> avg, avg_sq;
  for (const auto& [name, param] : params_) {
    avg.push_back(&find_state(state.at("exp_avg"), "exp_avg", name, param));
    avg_sq.push_back(&find_state(state.at("exp_avg_sq"), "exp_avg_sq", name, param));
  }
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params_.size(); ++i) {
    exp_avg_[i].copy_(*avg[i]);
    exp_avg_sq_[i].copy_(*avg_sq[i]);
  }
  step_ = step;
}

double global_grad_norm(const std::vector<torch::Tensor>& params) {
  torch::Tensor sum_of_squares;  // float64, on the gradients' device: one host sync at the end
  for (const torch::Tensor& param : params) {
    if (!param.grad().defined()) continue;
    const torch::Tensor squares = param.grad().to(torch::kFloat64).square().sum();
    sum_of_squares =
        sum_of_squares.defined() ? sum_of_squares + squares.to(sum_of_squares.device()) : squares;
  }
  return sum_of_squares.defined() ? std::sqrt(sum_of_squares.item<double>()) : 0.0;
}

// A NaN norm compares false and leaves the gradients alone; the trainer skips such steps.
void clip_grads(const std::vector<torch::Tensor>& params, double norm, double max_norm) {
  if (max_norm <= 0.0 || !(norm > max_norm)) return;
  torch::NoGradGuard no_grad;
  const double scale = max_norm / norm;
  for (const torch::Tensor& param : params) {
    if (param.grad().defined()) param.grad().mul_(scale);
  }
}

}  // namespace tandem::optim
