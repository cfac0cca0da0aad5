// Adam with bias correction: one pass over each parameter on CPU (float), tensor ops elsewhere
// (fused or masked, multi_tensor.h); state is held per named parameter in the order given, for
// bit-exact checkpoints.
#include "trainer/optim/adam.h"

#include <torch/csrc/autograd/variable.h>

#include <cmath>
#include <stdexcept>

#include "trainer/optim/multi_tensor.h"

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

bool cpu_float(const torch::Tensor& t) {
  return t.is_cpu() && t.scalar_type() == torch::kFloat && t.is_contiguous();
}

struct AdamScalars {
  float beta1, beta2, eps, correction2, step_size;  // step_size = lr / correction1
};

// The tensor-op update below, element by element in one pass (the state stays in cache), the
// gradient scaled by the clipping factor as it is read.
void adam_cpu(float* param, const float* grad, float* m, float* v, int64_t n, float scale,
              const AdamScalars& a) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] * scale;
    m[i] = m[i] * a.beta1 + (1.0f - a.beta1) * g;
    v[i] = v[i] * a.beta2 + (1.0f - a.beta2) * g * g;
    param[i] -= a.step_size * m[i] / (std::sqrt(v[i] / a.correction2) + a.eps);
  }
}

double sum_of_squares_cpu(const float* x, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  return sum;
}

// The largest count a float32 holds exactly.
constexpr int64_t kMaxSteps = int64_t{1} << 24;

torch::Device device_of(const std::vector<torch::Tensor>& params) {
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

std::vector<torch::Tensor> parameter_tensors(const Adam::NamedTensors& named) {
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, param] : named) tensors.push_back(param);
  return tensors;
}

void check_step_range(int64_t step) {
  if (step < 0 || step > kMaxSteps) {
    throw std::invalid_argument("optimizer state: step " + std::to_string(step) + " outside [0, " +
                                std::to_string(kMaxSteps) + "]");
  }
}

}  // namespace

Adam::Adam(NamedTensors named_params, AdamOptions options)
    : Adam(named_params, options, ShardPlan(ShardPlan::shapes_of(named_params))) {}

Adam::Adam(NamedTensors named_params, AdamOptions options, ShardPlan plan)
    : params_(std::move(named_params)), options_(options), plan_(std::move(plan)) {
  tensors_ = parameter_tensors(params_);
  bool same = plan_.params() == params_.size();
  for (size_t i = 0; same && i < params_.size(); ++i)
    same = tensors_[i].sizes().vec() == plan_.shape(i);
  if (!same) {
    throw std::invalid_argument("Adam: the shard plan describes other parameters than the " +
                                std::to_string(tensors_.size()) + " given");
  }
  torch::NoGradGuard no_grad;
  for (const Piece& piece : plan_.owned()) {
    updated_.push_back(ShardPlan::slice(tensors_[piece.param].detach(), piece));
    exp_avg_.push_back(torch::zeros_like(updated_.back(), torch::MemoryFormat::Contiguous));
    exp_avg_sq_.push_back(torch::zeros_like(updated_.back(), torch::MemoryFormat::Contiguous));
  }
  step_ = torch::zeros({}, torch::TensorOptions(device_of(tensors_)).dtype(torch::kFloat32));
}

void Adam::step(double lr) { step(lr, open_gate(device_of(tensors_))); }

// m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;  p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) +
// eps), with g the gradient times gate.scale.
void Adam::step(double lr, const GradientGate& gate) {
  if (gate.finite.is_cpu()) {
    step_on_cpu(lr, gate);
    return;
  }
  auto grads = piece_gradients();
  const AdamUpdate update{options_.beta1, options_.beta2, options_.eps, lr,
                          gate.scale,     gate.finite};
  if (fused_adam_update(updated_, grads, exp_avg_, exp_avg_sq_, step_, update)) return;
  adam_masked_update(updated_, grads, exp_avg_, exp_avg_sq_, step_, update);
}

void Adam::take_gradients_from(std::vector<torch::Tensor> pieces) {
  bool fits = pieces.size() == updated_.size();
  for (size_t i = 0; fits && i < pieces.size(); ++i) {
    fits = pieces[i].sizes() == updated_[i].sizes() &&
           pieces[i].scalar_type() == updated_[i].scalar_type();
  }
  if (!fits) {
    throw std::invalid_argument("Adam: the gradients given are not one per piece of this rank");
  }
  piece_grads_ = std::move(pieces);
}

std::vector<torch::Tensor> Adam::piece_gradients() const {
  if (!piece_grads_.empty()) return piece_grads_;
  std::vector<torch::Tensor> grads;
  for (const Piece& piece : plan_.owned()) {
    const torch::Tensor& grad = tensors_[piece.param].grad();
    grads.push_back(grad.defined() ? ShardPlan::slice(grad, piece) : grad);
  }
  return grads;
}

// The gate is on the CPU: read, it decides here.
void Adam::step_on_cpu(double lr, const GradientGate& gate) {
  if (!gate.finite.item<bool>()) return;
  torch::NoGradGuard no_grad;
  const int64_t t = step_count() + 1;
  if (t > kMaxSteps) {
    throw std::runtime_error("Adam: more than " + std::to_string(kMaxSteps) +
                             " updates, beyond the exact range of its float32 step count");
  }
  step_.fill_(static_cast<double>(t));
  const double correction1 = 1.0 - std::pow(options_.beta1, static_cast<double>(t));
  const double correction2 = 1.0 - std::pow(options_.beta2, static_cast<double>(t));
  const double scale = gate.scale.item<double>();
  const AdamScalars scalars{static_cast<float>(options_.beta1), static_cast<float>(options_.beta2),
                            static_cast<float>(options_.eps), static_cast<float>(correction2),
                            static_cast<float>(lr / correction1)};
  const auto grads = piece_gradients();
  for (size_t i = 0; i < updated_.size(); ++i) {
    torch::Tensor& param = updated_[i];
    if (!grads[i].defined()) continue;
    torch::Tensor grad = grads[i];
    if (cpu_float(param) && cpu_float(grad)) {
      adam_cpu(param.data_ptr<float>(), grad.data_ptr<float>(), exp_avg_[i].data_ptr<float>(),
               exp_avg_sq_[i].data_ptr<float>(), param.numel(), static_cast<float>(scale), scalars);
      // Written through its pointer: counted here (in the counter it shares with its parameter),
      // as the fused GPU update counts its writes.
      torch::autograd::impl::bump_version(param);
      continue;
    }
    if (scale != 1.0) grad = grad.mul(scale);
    exp_avg_[i].mul_(options_.beta1).add_(grad, 1.0 - options_.beta1);
    exp_avg_sq_[i].mul_(options_.beta2).addcmul_(grad, grad, 1.0 - options_.beta2);
    const torch::Tensor denominator = exp_avg_sq_[i].div(correction2).sqrt_().add_(options_.eps);
    param.addcdiv_(exp_avg_[i], denominator, -lr / correction1);
  }
}

int64_t Adam::step_count() const { return static_cast<int64_t>(step_.item<float>()); }

void Adam::zero_grad() {
  torch::NoGradGuard no_grad;
  auto grads = gradients(tensors_);
  if (all_on_gpu(grads)) {
    at::_foreach_zero_(grads);
    return;
  }
  for (auto& [name, param] : params_) {
    if (param.grad().defined()) param.mutable_grad().zero_();
  }
}

void Adam::release_gradients() {
  for (auto& [name, param] : params_) param.mutable_grad() = torch::Tensor();
}

// The live buffers, not copies: a checkpoint writer reads them before the next step().
std::map<std::string, Adam::NamedTensors> Adam::state() const {
  std::map<std::string, NamedTensors> state;
  auto& exp_avg = state["exp_avg"];
  auto& exp_avg_sq = state["exp_avg_sq"];
  for (size_t i = 0; i < updated_.size(); ++i) {
    const std::string& name = params_[plan_.owned()[i].param].first;
    exp_avg.emplace_back(name, exp_avg_[i]);
    exp_avg_sq.emplace_back(name, exp_avg_sq_[i]);
  }
  return state;
}

void Adam::check_state(const std::map<std::string, NamedTensors>& state) const {
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
    for (const auto& [name, param] : params_)
      find_state(state.at(group_name), group_name, name, param);
  }
}

void Adam::load_state(const std::map<std::string, NamedTensors>& state, int64_t step) {
  check_step_range(step);
  // Everything is checked before anything is copied, so a failed load leaves the optimizer as it
  // was.
  check_state(state);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < updated_.size(); ++i) {
    const Piece& piece = plan_.owned()[i];
    const auto& [name, param] = params_[piece.param];
    const auto saved = [&](const char* group) {
      return ShardPlan::slice(find_state(state.at(group), group, name, param).contiguous(), piece);
    };
    exp_avg_[i].copy_(saved("exp_avg"));
    exp_avg_sq_[i].copy_(saved("exp_avg_sq"));
  }
  step_.fill_(static_cast<double>(step));
}

void Adam::set_step_count(int64_t step) {
  check_step_range(step);
  step_.fill_(static_cast<double>(step));
}

torch::Tensor sum_of_squares_of(const std::vector<torch::Tensor>& grads) {
  torch::NoGradGuard no_grad;
  if (all_on_gpu(grads)) return sum_of_squares(grads);
  torch::Tensor device_sum;  // float64, on the gradients' device
  double cpu_sum = 0;  // float gradients on CPU: summed in one pass each, without a float64 copy
  for (const torch::Tensor& grad : grads) {
    if (!grad.defined()) continue;
    if (cpu_float(grad)) {
      cpu_sum += sum_of_squares_cpu(grad.data_ptr<float>(), grad.numel());
      continue;
    }
    const torch::Tensor squares = grad.to(torch::kFloat64).square().sum();
    device_sum = device_sum.defined() ? device_sum + squares.to(device_sum.device()) : squares;
  }
  if (!device_sum.defined()) return torch::scalar_tensor(cpu_sum, torch::kFloat64);
  return device_sum.add_(cpu_sum);
}

torch::Tensor grad_norm(const std::vector<torch::Tensor>& params) {
  return sum_of_squares_of(gradients(params)).sqrt_();
}

GradientGate gate_gradients(const std::vector<torch::Tensor>& params, double max_norm) {
  return gate_of_norm(grad_norm(params), max_norm);
}

GradientGate gate_of_norm(torch::Tensor norm, double max_norm) {
  torch::NoGradGuard no_grad;
  GradientGate gate;
  gate.norm = std::move(norm);
  gate.finite = torch::isfinite(gate.norm);
  const torch::Tensor one = torch::ones_like(gate.norm);
  torch::Tensor scale = one;
  if (max_norm > 0) {
    // A NaN norm compares false; such a step is skipped whatever the factor.
    scale = torch::where(gate.norm > max_norm,
                         torch::full_like(gate.norm, max_norm).div_(gate.norm), one);
  }
  gate.scale = torch::where(gate.finite, scale, torch::zeros_like(scale));
  return gate;
}

GradientGate open_gate(const torch::Device& device) {
  const auto options = torch::TensorOptions(device).dtype(torch::kFloat64);
  return {torch::zeros({}, options), torch::ones({}, options),
          torch::ones({}, options.dtype(torch::kBool))};
}

}  // namespace tandem::optim
