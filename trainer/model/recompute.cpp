#include "trainer/model/recompute.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <optional>
#include <utility>

#include "trainer/model/autocast.h"

namespace tandem::model {
namespace {

// The generators a layer draws its dropout masks from: the CPU's (the CPU kernels seed theirs from
// it), and the GPU's of the layer's device.
struct RandomStreams {
  torch::Tensor cpu;
  torch::Tensor gpu;
  std::optional<torch::Device> device;

  static RandomStreams now(const torch::Device& device) {
    RandomStreams s;
    s.cpu = state_of(at::detail::getDefaultCPUGenerator());
    if (device.is_cuda()) {
      s.device = device;
      s.gpu = state_of(at::globalContext().defaultGenerator(device));
    }
    return s;
  }

  void restore() const {
    set(at::detail::getDefaultCPUGenerator(), cpu);
    if (device) set(at::globalContext().defaultGenerator(*device), gpu);
  }

 private:
  static torch::Tensor state_of(at::Generator generator) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    return generator.get_state();
  }
  static void set(at::Generator generator, const torch::Tensor& state) {
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state);
  }
};

// What the backward pass needs to run the layer again: the layer, the streams and autocast as the
// forward pass found them.
struct LayerCall : torch::CustomClassHolder {
  LayerFunction layer;
  RandomStreams streams;
  bool autocast = false;
  torch::Device device = torch::kCPU;
};

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The forward pass of a recomputed layer on its tensor inputs (x, and memory where defined):
// nothing recorded (autograd records nothing inside a Function's forward), the inputs kept.
torch::Tensor forward_keeping_inputs(AutogradContext* ctx, const variable_list& inputs,
                                     const c10::intrusive_ptr<LayerCall>& call) {
  const torch::Tensor& x = inputs.front();
  call->streams = RandomStreams::now(x.device());
  call->autocast = autocast_enabled(x.device());
  call->device = x.device();
  ctx->save_for_backward(inputs);
  ctx->saved_data["call"] = c10::IValue::make_capsule(call);
  return call->layer(x, inputs.size() > 1 ? inputs[1] : torch::Tensor());
}

// The layer again, on leaves standing for the kept inputs, its streams and autocast as the forward
// pass found them, then its own backward: the parameters' gradients accumulate (their hooks run),
// and the leaves' are the inputs'.
variable_list backward_recomputing(AutogradContext* ctx, const variable_list& grads) {
  const auto call =
      c10::static_intrusive_pointer_cast<LayerCall>(ctx->saved_data["call"].toCapsule());
  variable_list inputs = ctx->get_saved_variables();
  for (auto& t : inputs) t = t.detach().requires_grad_(t.requires_grad());
  const RandomStreams after = RandomStreams::now(call->device);
  call->streams.restore();
  torch::Tensor y;
  {
    torch::AutoGradMode grad(true);
    AutocastGuard autocast(call->autocast, call->device);
    y = call->layer(inputs[0], inputs.size() > 1 ? inputs[1] : torch::Tensor());
  }
  after.restore();  // the streams go on from where the forward pass left them
  torch::autograd::backward({y}, {grads[0]});
  variable_list out;
  for (const auto& t : inputs) out.push_back(t.requires_grad() ? t.grad() : torch::Tensor());
  out.emplace_back();  // the call
  return out;
}

// LibTorch 1.13's Functions take no undefined tensor: an encoder layer's (x) and a decoder layer's
// (x, memory) are two.
struct RecomputeX : torch::autograd::Function<RecomputeX> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               c10::intrusive_ptr<LayerCall> call) {
    return forward_keeping_inputs(ctx, {x}, call);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return backward_recomputing(ctx, grads);
  }
};

struct RecomputeXMemory : torch::autograd::Function<RecomputeXMemory> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& memory, c10::intrusive_ptr<LayerCall> call) {
    return forward_keeping_inputs(ctx, {x, memory}, call);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return backward_recomputing(ctx, grads);
  }
};

}  // namespace

torch::Tensor recomputed(const LayerFunction& layer, const torch::Tensor& x,
                         const torch::Tensor& memory) {
  if (!torch::GradMode::is_enabled()) return layer(x, memory);
  auto call = c10::make_intrusive<LayerCall>();
  call->layer = layer;
  // A Function's output records a backward pass only where an input requires a gradient, and the
  // layer's parameters are not inputs: below a frozen embedding (a LoRA base) neither x nor memory
  // may require one. x then stands in as a leaf that does (its gradient made and let go).
  const bool recorded = x.requires_grad() || (memory.defined() && memory.requires_grad());
  const auto in = recorded ? x : x.detach().requires_grad_();
  return memory.defined() ? RecomputeXMemory::apply(in, memory, call)
                          : RecomputeX::apply(in, call);
}

}  // namespace tandem::model
