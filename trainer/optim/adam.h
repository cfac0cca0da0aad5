// Adam (Kingma & Ba) with bias correction, state held per named parameter so it can be saved to
// and restored from a checkpoint bit-exactly; and clipping by the global gradient norm.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::optim {

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-9;
};

class Adam {
 public:
  Adam(std::vector<std::pair<std::string, torch::Tensor>> named_params, AdamOptions options);

  // One update of every parameter that has a gradient, at learning rate `lr`.
  void step(double lr);
  void zero_grad();  // sets gradients to zero (keeps the buffers)
  int64_t step_count() const { return step_; }
  // The parameters it updates, in the order given.
  const std::vector<torch::Tensor>& parameters() const { return tensors_; }

  // "exp_avg" and "exp_avg_sq" groups, parameter name → tensor, and the step count.
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> state() const;
  // Throws std::invalid_argument naming the parameter when a name or shape is missing or differs.
  void load_state(const std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>>& state,
                  int64_t step);

 private:
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> tensors_;  // the same parameters, for multi-tensor operations
  AdamOptions options_;
  std::vector<torch::Tensor> exp_avg_;
  std::vector<torch::Tensor> exp_avg_sq_;
  int64_t step_ = 0;

  bool step_on_gpu(double lr, double correction1, double correction2);
};

// The L2 norm of all gradients together (float64 accumulation).
double global_grad_norm(const std::vector<torch::Tensor>& params);
// Scales every gradient by max_norm / norm when norm > max_norm (max_norm 0 disables).
void clip_grads(const std::vector<torch::Tensor>& params, double norm, double max_norm);

}  // namespace tandem::optim
