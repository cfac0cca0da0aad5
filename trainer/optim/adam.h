// Adam with bias correction and its state per named parameter (saved and restored bit-exactly), and
// the gate before it: global gradient norm, clipping and the skip of a non-finite step.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optim/shard_plan.h"

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

// The sum of the squares of every element of `grads` (undefined ones count as zero), as a float64
// 0-dim tensor on their device; float tensors on the CPU are summed in one pass each.
torch::Tensor sum_of_squares_of(const std::vector<torch::Tensor>& grads);
// The L2 norm of all the parameters' gradients together (sum_of_squares_of them).
torch::Tensor grad_norm(const std::vector<torch::Tensor>& params);
// The gate for clipping at max_norm (0 disables clipping; a non-finite norm still skips).
GradientGate gate_gradients(const std::vector<torch::Tensor>& params, double max_norm);
// The same from the norm (float64, 0-dim) of the gradients, however it was summed.
GradientGate gate_of_norm(torch::Tensor norm, double max_norm);
// Gradients used as they are (scale 1, finite), on `device`.
GradientGate open_gate(const torch::Device& device);

// With a sharded plan, a rank keeps the moments of its own pieces only and updates only those
// elements (from slices of the whole gradients, or from the pieces' gradients alone where those
// are sharded too: take_gradients_from); the updated pieces then travel to the other ranks
// (shard_exchange.h). The step count is kept, and moves, on every rank alike.
class Adam {
 public:
  using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

  // Every parameter whole, on this rank (not sharded).
  Adam(NamedTensors named_params, AdamOptions options);
  // The pieces `plan` gives this rank (the plan must describe these parameters).
  Adam(NamedTensors named_params, AdamOptions options, ShardPlan plan);

  // One update of every parameter (piece, when sharded) that has a gradient, scaled by gate.scale,
  // at learning rate `lr`; nothing changes (the step count included) where gate.finite is false. On
  // the CPU the gate is read directly; elsewhere it is applied on the device: fused Adam (LibTorch
  // >= 2 on CUDA, clipping as its gradient scale and the skip as its found_inf), else masked tensor
  // ops.
  void step(double lr, const GradientGate& gate);
  void step(double lr);  // gradients as they are
  // The gradients of this rank's pieces are from now on `pieces` (one per plan().owned(), shaped
  // as its slice; the gradient reducer's shards, ZeRO stage 2), not slices of the parameters'
  // .grad(). They are read at each step.
  void take_gradients_from(std::vector<torch::Tensor> pieces);
  void zero_grad();      // sets gradients to zero (keeps the buffers)
  // Lets the gradients go (undefined): the next backward pass hands each parameter its gradient
  // as it is, instead of adding it to zeros (a kernel per parameter).
  void release_gradients();
  // Updates taken (skipped steps not counted). Read from the device: on a GPU it waits for it.
  int64_t step_count() const;
  // The parameters, all of them, in the order given (the gradients' owners).
  const std::vector<torch::Tensor>& parameters() const { return tensors_; }
  const ShardPlan& plan() const { return plan_; }

  // "exp_avg" and "exp_avg_sq" groups: the live moments of this rank's pieces (plan().owned()
  // order), each named after its parameter; whole parameters when not sharded.
  std::map<std::string, NamedTensors> state() const;
  // A whole state (every parameter's moments, as a checkpoint holds them): checked against all
  // parameters, then this rank's pieces copied in. Throws std::invalid_argument naming the
  // parameter when a name or shape is missing or differs, changing nothing.
  void load_state(const std::map<std::string, NamedTensors>& state, int64_t step);
  // The same check alone.
  void check_state(const std::map<std::string, NamedTensors>& state) const;
  // Sets the update count (after the moments arrived another way, e.g. by broadcast).
  void set_step_count(int64_t step);

 private:
  NamedTensors params_;
  std::vector<torch::Tensor> tensors_;  // the same parameters, for multi-tensor operations
  AdamOptions options_;
  ShardPlan plan_;
  std::vector<torch::Tensor> updated_;  // this rank's pieces of the parameters (views)
  std::vector<torch::Tensor> exp_avg_;  // their moments, in the same order
  std::vector<torch::Tensor> exp_avg_sq_;
  std::vector<torch::Tensor> piece_grads_;  // take_gradients_from's; empty: slices of .grad()
  // float32 0-dim on the parameters' device, as fused Adam reads it (exact up to 2^24 steps).
  torch::Tensor step_;

  void step_on_cpu(double lr, const GradientGate& gate);
  // This rank's pieces of the gradients (undefined where a parameter has none).
  std::vector<torch::Tensor> piece_gradients() const;
};

}  // namespace tandem::optim
