#include "trainer/model/adapter.h"

#include <cmath>

#include "trainer/model/frozen_base.h"

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
