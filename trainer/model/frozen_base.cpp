#include "trainer/model/frozen_base.h"

#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>

#include "trainer/kernels/cpu/int8_linear.h"
#include "trainer/kernels/fused/ops.h"

namespace tandem::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::string scale_name(const std::string& name) { return name + "_scale"; }

torch::Tensor parameter(const torch::nn::Module& layer, const std::string& name) {
  const auto params = layer.named_parameters(/*recurse=*/false);
  const auto* found = params.find(name);
  if (found == nullptr) {
    throw std::invalid_argument("layer " + layer.name() + " has no parameter '" + name + "'");
  }
  return *found;
}

// rows [n, in] Wᵀ + b with W (and b) frozen: the gradient of the rows alone, from W widened
// again. Its output is no view, so that relu may run on it in place.
struct WidenedLinear : torch::autograd::Function<WidenedLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& scales,
                               const torch::Tensor& bias) {
    const HeldWeight held{weight, scales.value_or(torch::Tensor())};
    ctx->save_for_backward({held.values, held.scales});
    return torch::addmm(bias, rows, held.as(rows.scalar_type()).t());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const HeldWeight held{saved[0], saved[1]};
    const auto& g = grads[0];
    return {torch::matmul(g, held.as(g.scalar_type())), torch::Tensor(), torch::Tensor(),
            torch::Tensor()};
  }
};

}  // namespace

bool HeldWeight::widened_for(torch::ScalarType type) const {
  return !values.requires_grad() && (scales.defined() || values.scalar_type() != type);
}

HeldWeight HeldWeight::rows(int64_t begin, int64_t n) const {
  return {values.narrow(0, begin, n), scales.defined() ? scales.narrow(0, begin, n) : scales};
}

torch::Tensor HeldWeight::as(torch::ScalarType type) const {
  if (!scales.defined()) return values.scalar_type() == type ? values : values.to(type);
  auto widened = values.to(torch::kFloat).mul_(scales.unsqueeze(1));
  return type == torch::kFloat ? widened : widened.to(type);
}

c10::optional<torch::Tensor> HeldWeight::scales_input() const {
  return scales.defined() ? c10::optional<torch::Tensor>(scales) : c10::nullopt;
}

torch::Tensor HeldWeight::lookup(const torch::Tensor& ids) const {
  auto rows = torch::embedding(values, ids);
  if (!scales.defined()) return rows;
  return rows.to(torch::kFloat).mul_(torch::embedding(scales.unsqueeze(1), ids));
}

HeldWeight held_weight(const torch::nn::Module& layer, const torch::Tensor& weight) {
  HeldWeight held{weight, torch::Tensor()};
  if (weight.scalar_type() == torch::kChar) {
    const std::string name = scale_name("weight");
    const auto buffers = layer.named_buffers(/*recurse=*/false);
    const auto* scales = buffers.find(name);
    if (scales == nullptr) {
      throw std::logic_error("the int8 weight of layer " + layer.name() + " has no buffer '" +
                             name + "'");
    }
    held.scales = *scales;
  }
  return held;
}

void hold_frozen(torch::nn::Module& layer, const std::string& name, const torch::Tensor& value,
                 HeldAs as) {
  torch::NoGradGuard no_grad;
  auto param = parameter(layer, name);
  param.requires_grad_(false);
  if (value.dim() != 2 || as == HeldAs::kFp32) {
    param.set_data(value);
  } else if (as == HeldAs::kBf16) {
    param.set_data(value.to(torch::kBFloat16));
  } else {
    const kernels::RowQuantized quantized = kernels::quantize_rows(value);
    param.set_data(quantized.values);
    layer.register_buffer(scale_name(name), quantized.scales);
  }
}

torch::Tensor weight_for(const torch::Tensor& weight, const torch::Tensor& x) {
  return HeldWeight{weight, torch::Tensor()}.as(x.scalar_type());
}

torch::Tensor base_linear(const torch::Tensor& x, const HeldWeight& weight,
                          const torch::Tensor& bias) {
  if (!weight.widened_for(x.scalar_type()) || bias.requires_grad()) {
    return kernels::linear_rows(x, weight.as(x.scalar_type()), bias);
  }
  const auto& values = weight.values;
  if (x.dim() == 2) return WidenedLinear::apply(x, values, weight.scales_input(), bias);
  auto sizes = x.sizes().vec();
  sizes.back() = values.size(0);
  return WidenedLinear::apply(x.reshape({-1, x.size(-1)}), values, weight.scales_input(), bias)
      .view(sizes);
}

torch::Tensor base_linear(const torch::Tensor& x, const torch::nn::LinearImpl& layer) {
  if (layer.weight.requires_grad() || layer.weight.scalar_type() == x.scalar_type()) {
    return kernels::linear_rows(x, layer.weight, layer.bias);
  }
  return base_linear(x, held_weight(layer, layer.weight), layer.bias);
}

}  // namespace tandem::model
