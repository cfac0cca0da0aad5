#include "trainer/model/bf16_linear.h"

#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "trainer/kernels/cuda/gpu_ops.h"

namespace tandem::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// mm with an fp32 result from bf16 operands (aten::mm.dtype) exists from LibTorch 2.8 on; where it
// does not serve (older LibTorch, the CPU), the product is cast.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 8)
#define TANDEM_MM_OUT_DTYPE 1
#endif

#ifdef TANDEM_MM_OUT_DTYPE
bool fp32_products_on_gpu() {
  static const bool works = [] {
    try {
      const auto options = torch::TensorOptions(torch::kCUDA).dtype(torch::kBFloat16);
      const auto a = torch::ones({8, 16}, options), b = torch::ones({16, 8}, options);
      return at::mm(a, b, torch::kFloat).scalar_type() == torch::kFloat;
    } catch (const std::exception&) {
      return false;
    }
  }();
  return works;
}
#endif

// a · b in fp32, summed in fp32 either way.
torch::Tensor product_fp32(const torch::Tensor& a, const torch::Tensor& b) {
#ifdef TANDEM_MM_OUT_DTYPE
  if (a.is_cuda() && fp32_products_on_gpu()) return at::mm(a, b, torch::kFloat);
#endif
  return at::mm(a, b).to(torch::kFloat);
}

// Σ over rows of g [rows, out], fp32.
torch::Tensor bias_gradient(const torch::Tensor& g) {
  if (kernels::own_kernels_for(g)) return kernels::column_sums(g);
  return g.sum(0, /*keepdim=*/false, torch::kFloat);
}

// Inputs: x [rows, in] bf16, the parts' fp32 weights and biases (the gradients' receivers), their
// bf16 copies stacked (weight16 [Σ out, in], bias16 [Σ out]), and relu.
class LinearFunction : public torch::autograd::Function<LinearFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, at::TensorList weights,
                               at::TensorList /*biases*/, const torch::Tensor& weight16,
                               const torch::Tensor& bias16, bool relu) {
    torch::Tensor y;
    if (relu && x.is_cuda()) {
      y = at::_addmm_activation(bias16, x, weight16.t());  // relu in the product's epilogue
    } else {
      y = torch::addmm(bias16, x, weight16.t());
      if (relu) y.relu_();
    }
    ctx->save_for_backward({x, weight16, relu ? y : torch::Tensor()});
    std::vector<int64_t> rows;
    for (const auto& w : weights) rows.push_back(w.size(0));
    ctx->saved_data["rows"] = rows;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &weight16 = saved[1], &y = saved[2];
    auto g = grads[0].contiguous();
    torch::Tensor bias_sums;
    if (y.defined() && kernels::own_kernels_for(g) && kernels::own_kernels_for(y)) {
      std::tie(g, bias_sums) = kernels::relu_backward_column_sums(g, y);  // one pass for both
    } else if (y.defined()) {
      g = at::threshold_backward(g, y, 0);
    }
    const auto rows = ctx->saved_data["rows"].toIntVector();
    const auto weight_grads = product_fp32(g.t(), x).split_with_sizes(rows, 0);
    const auto bias_grads =
        (bias_sums.defined() ? bias_sums : bias_gradient(g)).split_with_sizes(rows, 0);
    variable_list out{g.mm(weight16)};
    out.insert(out.end(), weight_grads.begin(), weight_grads.end());
    out.insert(out.end(), bias_grads.begin(), bias_grads.end());
    out.resize(out.size() + 3);  // weight16, bias16, relu: no gradient
    return out;
  }
};

torch::Tensor rows_of(const torch::Tensor& x) { return x.reshape({-1, x.size(-1)}); }

}  // namespace

Bf16Copy::Bf16Copy(std::vector<std::vector<torch::Tensor>> groups) : groups_(std::move(groups)) {
  for (const auto& group : groups_) {
    if (group.empty()) throw std::invalid_argument("Bf16Copy: an empty group");
    parts_.insert(parts_.end(), group.begin(), group.end());
  }
}

const std::vector<torch::Tensor>& Bf16Copy::get() {
  if (stale()) remake();
  return copies_;
}

bool Bf16Copy::stale() const {
  if (copies_.empty()) return true;
  for (size_t i = 0; i < parts_.size(); ++i) {
    const auto& part = parts_[i];
    if (part._version() != versions_[i] || part.data_ptr() != storage_[i] ||
        part.device() != slices_[i].device()) {
      return true;
    }
  }
  return false;
}

void Bf16Copy::allocate() {
  copies_.clear();
  slices_.clear();
  for (const auto& group : groups_) {
    auto sizes = group.front().sizes().vec();
    sizes[0] = 0;
    for (const auto& part : group) sizes[0] += part.size(0);
    copies_.push_back(torch::empty(sizes, group.front().options().dtype(torch::kBFloat16)));
    int64_t row = 0;
    for (const auto& part : group) {
      slices_.push_back(copies_.back().narrow(0, row, part.size(0)));
      row += part.size(0);
    }
  }
}

void Bf16Copy::remake() {
  torch::NoGradGuard no_grad;
  if (copies_.empty() || copies_.front().device() != parts_.front().device()) allocate();
  std::vector<torch::Tensor> sources;
  for (const auto& part : parts_) sources.push_back(part.detach());
  bool copied = false;
  if (kernels::own_list_kernels_for(sources)) {
    kernels::copy_to_bf16(sources, slices_);  // every part in one launch
    copied = true;
  }
#if TORCH_VERSION_MAJOR >= 2
  if (!copied && parts_.front().is_cuda()) {
    at::_foreach_copy_(slices_, sources);  // fp32 → bf16 in a few launches for all parts
    copied = true;
  }
#endif
  if (!copied) {
    for (size_t i = 0; i < slices_.size(); ++i) slices_[i].copy_(sources[i]);
  }
  versions_.clear();
  storage_.clear();
  for (const auto& part : parts_) {
    versions_.push_back(part._version());
    storage_.push_back(part.data_ptr());
  }
  ++copies_made_;
}

Bf16Linear::Bf16Linear(std::vector<torch::Tensor> weights, std::vector<torch::Tensor> biases)
    : weights_(std::move(weights)), biases_(std::move(biases)), copy_({weights_, biases_}) {
  if (weights_.size() != biases_.size()) {
    throw std::invalid_argument("Bf16Linear: " + std::to_string(weights_.size()) + " weights, " +
                                std::to_string(biases_.size()) + " biases");
  }
}

torch::Tensor Bf16Linear::operator()(const torch::Tensor& x, bool relu) {
  const auto& copies = copy_.get();
  const auto x16 = x.scalar_type() == torch::kBFloat16 ? x : x.to(torch::kBFloat16);
  // As TensorLists, so autograd sees each part as an input (a std::vector would be opaque to it).
  const auto y = LinearFunction::apply(rows_of(x16), at::TensorList(weights_),
                                       at::TensorList(biases_), copies[0], copies[1], relu);
  auto sizes = x.sizes().vec();
  sizes.back() = copies[0].size(0);
  return y.view(sizes);
}

bool bf16_linear_applies(const torch::Tensor& x) {
  return x.is_cuda() && x.scalar_type() == torch::kBFloat16 && torch::GradMode::is_enabled() &&
         kernels::own_kernels_enabled();
}

}  // namespace tandem::model
