// Adam with bias correction and its state per named parameter (saved and restored bit-exactly), and
// the gate before it: global gradient norm, clipping and the skip of a non-finite step.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::optim {

// Adam (Kingma & Ba) with bias correction, state held per named parameter so it can be saved to
// and restored from a checkpoint bit-exactly; and the gate in front of it: the global gradient
// norm, the clipping factor and the skip of a non-finite step, decided on the gradients' device so
// that a step on a GPU never waits for the GPU (nothing is read by the host until a log step).

struct AdamOptions {
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-9;
};

// What a step's gradients may do, as 0-dim tensors on the gradients' device.
struct GradientGate {
  torch::Tensor norm;    // float64: the L2 norm of all gradients together
  torch::Tensor scale;   // float64: max_norm / norm where norm > max_norm > 0, else 1; 0 if skipped
  torch::Tensor finite;  // bool: the norm is finite, so the update goes ahead (else every rank,
                         // holding the same reduced gradients, skips it)
};

// The L2 norm of all gradients together (float64 accumulation), on their device; float gradients
// on the CPU are summed in one pass each.
torch::Tensor grad_norm(const std::vector<torch::Tensor>& params);
// The gate for clipping at max_norm (0 disables clipping; a non-finite norm still skips).
GradientGate gate_gradients(const std::vector<torch::Tensor>& params, double max_norm);
// Gradients used as they are (scale 1, finite), on `device`.
GradientGate open_gate(const torch::Device& device);

class Adam {
 public:
  Adam(std::vector<std::pair<std::string, torch::Tensor>> named_params, AdamOptions options);

  // One update of every parameter that has a gradient, scaled by gate.scale, at learning rate
  // `lr`; nothing changes (the step count included) where gate.finite is false. On the CPU the
  // gate is read directly; elsewhere it is applied on the device: fused Adam (LibTorch >= 2 on
  // CUDA, clipping as its gradient scale and the skip as its found_inf), else masked tensor ops.
  void step(double lr, const GradientGate& gate);
  void step(double lr);  // gradients as they are
  void zero_grad();      // sets gradients to zero (keeps the buffers)
  // Lets the gradients go (undefined): the next backward pass hands each parameter its gradient
  // as it is, instead of adding it to zeros (a kernel per parameter).
  void release_gradients();
  // Updates taken (skipped steps not counted). Read from the device: on a GPU it waits for it.
  int64_t step_count() const;
  // The parameters it updates, in the order given.
  const std::vector<torch::Tensor>& parameters() const { return tensors_; }

  // "exp_avg" and "exp_avg_sq" groups, parameter name → tensor, and the step count.
  std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>> state() const;
  // Throws std::invalid_argument naming the parameter when a name or shape is missing or differs.
  void load_state(
      const std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>>& state,
      int64_t step);

 private:
  std::vector<std::pair<std::string, torch::Tensor>> params_;
  std::vector<torch::Tensor> tensors_;  // the same parameters, for multi-tensor operations
  AdamOptions options_;
  std::vector<torch::Tensor> exp_avg_;
  std::vector<torch::Tensor> exp_avg_sq_;
  // float32 0-dim on the parameters' device, as fused Adam reads it (exact up to 2^24 steps).
  torch::Tensor step_;

  void step_on_cpu(double lr, const GradientGate& gate);
};

}  // namespace tandem::optim
