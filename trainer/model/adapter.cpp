#include "trainer/model/adapter.h"

#include <torch/csrc/autograd/custom_function.h>

#include <cmath>

#include "trainer/kernels/fused/ops.h"

namespace tandem::model {

torch::Tensor Adapter::operator()(const torch::Tensor& x, bool training) const {
  const auto in = dropout > 0 && training ? torch::dropout(x, dropout, true) : x;
  const auto low = torch::matmul(in, weight_for(a, in).t());
  return torch::matmul(low, weight_for(b, low).t()) * scale;
}

Adapter add_adapter(torch::nn::LinearImpl& linear, const AdapterOptions& options) {
  const int64_t out = linear.weight.size(0), in = linear.weight.size(1);
  const auto type = torch::TensorOptions().dtype(torch::kFloat32).device(linear.weight.device());
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  Adapter adapter;
  adapter.a = linear.register_parameter(
      "lora_a", torch::empty({options.rank, in}, type).uniform_(-bound, bound));
  adapter.b = linear.register_parameter("lora_b", torch::zeros({out, options.rank}, type));
  adapter.scale = options.alpha / static_cast<double>(options.rank);
  adapter.dropout = options.dropout;
  return adapter;
}

torch::Tensor weight_for(const torch::Tensor& weight, const torch::Tensor& x) {
  return weight.scalar_type() == x.scalar_type() ? weight : weight.to(x.scalar_type());
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// rows [n, in] Wᵀ + b with W (and b) frozen: the gradient of the rows alone, from W widened
// again. Its output is no view, so that relu may run on it in place.
struct WidenedLinear : torch::autograd::Function<WidenedLinear> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& weight, const torch::Tensor& bias) {
    ctx->save_for_backward({weight});
    return torch::addmm(bias, rows, weight_for(weight, rows).t());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto weight = ctx->get_saved_variables()[0];
    const auto& g = grads[0];
    return {torch::matmul(g, weight_for(weight, g)), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

torch::Tensor base_linear(const torch::Tensor& x, const torch::Tensor& weight,
                          const torch::Tensor& bias) {
  if (weight.scalar_type() == x.scalar_type() || weight.requires_grad() || bias.requires_grad()) {
    return kernels::linear_rows(x, weight_for(weight, x), bias);
  }
  if (x.dim() == 2) return WidenedLinear::apply(x, weight, bias);
  auto sizes = x.sizes().vec();
  sizes.back() = weight.size(0);
  return WidenedLinear::apply(x.reshape({-1, x.size(-1)}), weight, bias).view(sizes);
}

torch::Tensor with_adapters(torch::Tensor base, const torch::Tensor& x,
                            const std::vector<const std::optional<Adapter>*>& parts,
                            const std::vector<int64_t>& widths, bool training) {
  bool any = false;
  for (const auto* part : parts) any = any || part->has_value();
  if (!any) return base;
  std::vector<torch::Tensor> terms;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (parts[i]->has_value()) {
      terms.push_back((**parts[i])(x, training).to(base.scalar_type()));
    } else {
      auto sizes = base.sizes().vec();
      sizes.back() = widths[i];
      terms.push_back(torch::zeros(sizes, base.options()));
    }
  }
  return base + (terms.size() == 1 ? terms.front() : torch::cat(terms, -1));
}

}  // namespace tandem::model
