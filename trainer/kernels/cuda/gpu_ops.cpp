#include "trainer/kernels/cuda/gpu_ops.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#ifdef TANDEM_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "trainer/kernels/cuda/cuda_kernels.h"
#include "trainer/kernels/cuda/philox.h"
#include "trainer/kernels/cuda/tensor_lists.h"
#endif

namespace tandem::kernels {

bool aten_kernels_only() {
  static const bool only = [] {
    const char* choice = std::getenv("TANDEM_KERNELS");
    return choice && std::strcmp(choice, "aten") == 0;
  }();
  return only;
}

#ifdef TANDEM_CUDA_KERNELS
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

cuda::Element element_of(const torch::Tensor& t) {
  return t.scalar_type() == torch::kBFloat16 ? cuda::Element::kBFloat16 : cuda::Element::kFloat;
}

void* stream_of(const torch::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

template <typename T>
T* pointer_or_null(const torch::Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

void require_own(const torch::Tensor& t, const char* op) {
  if (!own_kernels_for(t)) {
    throw std::invalid_argument(std::string(op) +
                                ": expected a contiguous fp32 or bf16 GPU tensor");
  }
}

// The column-sum kernel's arrival counters on a GPU and stream: one set each, kept from call to
// call and grown when a call needs more. The kernel leaves them at zero (each stripe's last block
// resets its own), so only a new set is zeroed; a fresh zeroed tensor a call was a fill kernel
// launched for every column sum, about 100 a base-shape step. Launches on one stream run in
// order, so no two share a counter at once. The sets are never freed: CUDA may be torn down first.
unsigned* arrival_counters(const torch::Tensor& like, int64_t count) {
  static std::mutex mutex;
  static auto* sets = new std::map<std::pair<int, void*>, torch::Tensor>();
  std::lock_guard<std::mutex> lock(mutex);
  torch::Tensor& set = (*sets)[{like.device().index(), stream_of(like)}];
  if (!set.defined() || set.numel() < count) {
    set = torch::zeros({std::max<int64_t>(count, set.defined() ? 2 * set.numel() : 0)},
                       like.options().dtype(torch::kInt));
  }
  return reinterpret_cast<unsigned*>(set.data_ptr<int32_t>());
}

// The column-sum kernel's scratch for a [rows, cols]: each block of rows' partial sums, per
// output, and one arrival counter per stripe of columns.
class ColumnScratch {
 public:
  ColumnScratch(const torch::Tensor& a, int64_t outputs)
      : work_(torch::empty({outputs * cuda::column_blocks(a.size(0)) * a.size(1)},
                           a.options().dtype(torch::kFloat))),
        arrivals_(arrival_counters(a, cuda::column_stripes(a.size(1)))) {}
  float* work() { return work_.data_ptr<float>(); }
  unsigned* arrivals() const { return arrivals_; }

 private:
  torch::Tensor work_;
  unsigned* arrivals_;
};

// Column sums of a [rows, cols] into `out` ([outputs, cols] fp32; with x, mean and rstd, out[0]
// gets the LayerNorm-scaled sums and out[1] the plain ones).
void column_sums_into(const torch::Tensor& out, const torch::Tensor& a, const torch::Tensor& x,
                      const torch::Tensor& mean, const torch::Tensor& rstd) {
  const int64_t outputs = out.size(0);
  ColumnScratch scratch(a, outputs);
  cuda::column_sums(a.data_ptr(), x.defined() ? x.data_ptr() : nullptr,
                    pointer_or_null<float>(mean), pointer_or_null<float>(rstd), element_of(a),
                    a.size(0), a.size(1), out[outputs - 1].data_ptr<float>(),
                    outputs > 1 ? out[0].data_ptr<float>() : nullptr, scratch.work(),
                    scratch.arrivals(), stream_of(a));
}

// LayerNorm's weight and bias gradients, fp32 column sums: Σ dy · (x − mean) · rstd and Σ dy over
// the rows of dy and x (normalized over the last dimension), mean and rstd fp32 per row.
variable_list layer_norm_parameter_gradients(const torch::Tensor& dy, const torch::Tensor& x,
                                             const torch::Tensor& mean, const torch::Tensor& rstd) {
  const int64_t d = x.size(-1);
  const auto sums = torch::empty({2, d}, dy.options().dtype(torch::kFloat));
  column_sums_into(sums, dy.view({-1, d}), x.contiguous().view({-1, d}), mean.view({-1}),
                   rstd.view({-1}));
  return {sums[0], sums[1]};
}

class LayerNormFunction : public torch::autograd::Function<LayerNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x,
                               const torch::Tensor& weight, const torch::Tensor& bias, double eps) {
    const auto w = weight.to(x.scalar_type()), b = bias.to(x.scalar_type());
    auto [y, mean, rstd] = at::native_layer_norm(x, {x.size(-1)}, w, b, eps);
    ctx->save_for_backward({x, w, mean, rstd});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &x = saved[0], &w = saved[1];
    const auto dy = grads[0].contiguous();
    const auto mean = saved[2].to(torch::kFloat).contiguous();
    const auto rstd = saved[3].to(torch::kFloat).contiguous();
    auto dx = std::get<0>(at::native_layer_norm_backward(dy, x, {x.size(-1)}, mean, rstd, w, {},
                                                         {true, false, false}));
    const auto params = layer_norm_parameter_gradients(dy, x, mean, rstd);
    return {dx, params[0], params[1], torch::Tensor()};
  }
};

// Dropout at p with the Philox stream at (seed, offset); none at p = 0.
cuda::Dropout dropout_at(double p, uint64_t seed, uint64_t offset) {
  cuda::Dropout dropout;
  if (p <= 0) return dropout;
  dropout.seed = seed;
  dropout.offset = offset;
  dropout.threshold = philox::keep_threshold(p);
  dropout.scale = static_cast<float>(1.0 / (1.0 - p));
  return dropout;
}

// The next dropout of the GPU's generator: its Philox seed and next offset (checkpoints save its
// state, so a resumed run draws the same masks).
cuda::Dropout next_dropout(double p, const torch::Device& device) {
  if (p <= 0) return cuda::Dropout();
  auto* generator = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      c10::nullopt, at::cuda::detail::getDefaultCUDAGenerator(device.index()));
  std::lock_guard<std::mutex> lock(generator->mutex_);
  const auto [seed, offset] = generator->philox_engine_inputs(4);  // one draw of 4 words a run
  return dropout_at(p, seed, offset);
}

// y = LayerNorm(residual + dropout(x, p)) over bf16 rows in one kernel (cuda::add_layer_norm), and
// its backward in another: residual's gradient is the sum's, x's the same through the mask.
class AddLayerNormFunction : public torch::autograd::Function<AddLayerNormFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& residual,
                               const torch::Tensor& x, const torch::Tensor& weight,
                               const torch::Tensor& bias, double eps, double p) {
    const int64_t cols = x.size(-1), rows = x.numel() / cols;
    auto stat_shape = x.sizes().vec();
    stat_shape.back() = 1;
    auto sum = torch::empty_like(x), y = torch::empty_like(x);
    auto mean = torch::empty(stat_shape, x.options().dtype(torch::kFloat));
    auto rstd = torch::empty_like(mean);
    const auto w = weight.to(torch::kFloat).contiguous(), b = bias.to(torch::kFloat).contiguous();
    const auto dropout = next_dropout(p, x.device());
    cuda::add_layer_norm(residual.data_ptr(), x.data_ptr(), w.data_ptr<float>(),
                         b.data_ptr<float>(), rows, cols, static_cast<float>(eps), dropout,
                         sum.data_ptr(), y.data_ptr(), mean.data_ptr<float>(),
                         rstd.data_ptr<float>(), stream_of(x));
    ctx->save_for_backward({sum, weight, mean, rstd});
    ctx->saved_data["seed"] = static_cast<int64_t>(dropout.seed);
    ctx->saved_data["offset"] = static_cast<int64_t>(dropout.offset);
    ctx->saved_data["p"] = p;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &sum = saved[0], &mean = saved[2], &rstd = saved[3];
    const auto w = saved[1].to(torch::kFloat).contiguous();
    const auto dy = grads[0].contiguous();
    const double p = ctx->saved_data["p"].toDouble();
    const auto dropout = dropout_at(p, static_cast<uint64_t>(ctx->saved_data["seed"].toInt()),
                                    static_cast<uint64_t>(ctx->saved_data["offset"].toInt()));
    const int64_t cols = sum.size(-1), rows = sum.numel() / cols;
    auto dsum = torch::empty_like(sum);
    auto dx = p > 0 ? torch::empty_like(sum) : dsum;
    cuda::add_layer_norm_backward(dy.data_ptr(), sum.data_ptr(), mean.data_ptr<float>(),
                                  rstd.data_ptr<float>(), w.data_ptr<float>(), rows, cols, dropout,
                                  dsum.data_ptr(), p > 0 ? dx.data_ptr() : nullptr, stream_of(sum));
    const auto params = layer_norm_parameter_gradients(dy, sum, mean, rstd);
    return {dsum, dx, params[0], params[1], torch::Tensor(), torch::Tensor()};
  }
};

bool aligned16(const torch::Tensor& t) {
  return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

}  // namespace

bool own_kernels_for(const torch::Tensor& t) {
  return t.is_cuda() && t.is_contiguous() &&
         (t.scalar_type() == torch::kFloat || t.scalar_type() == torch::kBFloat16) &&
         !aten_kernels_only();
}

bool own_kernels_enabled() { return !aten_kernels_only(); }

void token_loss_rows_(torch::Tensor& logits, const torch::Tensor& targets,
                      const torch::Tensor& weight, double smoothing, const LossRowsOut& out) {
  require_own(logits, "token_loss_rows_");
  const auto t = targets.to(torch::kLong).contiguous();
  const auto w = weight.defined() ? weight.to(torch::kFloat).contiguous() : torch::Tensor();
  cuda::token_loss_rows(
      logits.data_ptr(), element_of(logits), logits.size(0), logits.size(1), t.data_ptr<int64_t>(),
      pointer_or_null<float>(w), static_cast<float>(smoothing), pointer_or_null<float>(out.lse),
      pointer_or_null<float>(out.target_logit), pointer_or_null<float>(out.mean_logit),
      pointer_or_null<int64_t>(out.argmax), stream_of(logits));
}

torch::Tensor column_sums(const torch::Tensor& a) {
  require_own(a, "column_sums");
  const auto sums = torch::empty({1, a.size(1)}, a.options().dtype(torch::kFloat));
  column_sums_into(sums, a, torch::Tensor(), torch::Tensor(), torch::Tensor());
  return sums[0];
}

std::pair<torch::Tensor, torch::Tensor> relu_backward_column_sums(const torch::Tensor& g,
                                                                  const torch::Tensor& y) {
  require_own(g, "relu_backward_column_sums");
  require_own(y, "relu_backward_column_sums");
  if (g.sizes() != y.sizes() || g.scalar_type() != y.scalar_type() || g.dim() != 2) {
    throw std::invalid_argument(
        "relu_backward_column_sums: expected g and y of one 2-d shape and type");
  }
  auto masked = torch::empty_like(g);
  auto sums = torch::empty({g.size(1)}, g.options().dtype(torch::kFloat));
  ColumnScratch scratch(g, 1);
  cuda::relu_backward_column_sums(g.data_ptr(), y.data_ptr(), element_of(g), g.size(0), g.size(1),
                                  masked.data_ptr(), sums.data_ptr<float>(), scratch.work(),
                                  scratch.arrivals(), stream_of(g));
  return {masked, sums};
}

torch::Tensor layer_norm_own(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps) {
  require_own(x, "layer_norm_own");
  return LayerNormFunction::apply(x, weight, bias, eps);
}

bool add_layer_norm_own_for(const torch::Tensor& residual, const torch::Tensor& x) {
  return own_kernels_for(residual) && own_kernels_for(x) && x.scalar_type() == torch::kBFloat16 &&
         residual.scalar_type() == torch::kBFloat16 && residual.sizes() == x.sizes() &&
         x.dim() >= 1 && cuda::add_layer_norm_fits(x.size(-1)) && aligned16(residual) &&
         aligned16(x);
}

torch::Tensor add_layer_norm_own(const torch::Tensor& residual, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                                 double p) {
  if (!add_layer_norm_own_for(residual, x)) {
    throw std::invalid_argument(
        "add_layer_norm_own: expected two contiguous bf16 GPU tensors of one shape, rows a "
        "multiple of 8 and at most 2,048 wide");
  }
  return AddLayerNormFunction::apply(residual, x, weight, bias, eps, p);
}

bool own_list_kernels_for(const std::vector<torch::Tensor>& tensors) {
  for (const auto& t : tensors) {
    if (!own_kernels_for(t) || t.scalar_type() != torch::kFloat ||
        t.device() != tensors.front().device()) {
      return false;
    }
  }
  return true;
}

namespace {

// The two lists as the kernels' parts, checked: of one length, each pair of one size, the
// targets of `target_type`, all contiguous on the sources' GPU.
class Parts {
 public:
  Parts(const std::vector<torch::Tensor>& sources, const std::vector<torch::Tensor>& targets,
        torch::ScalarType target_type, const char* op) {
    if (sources.size() != targets.size() || !own_list_kernels_for(sources)) {
      throw std::invalid_argument(std::string(op) +
                                  ": expected two lists of one length, the sources contiguous "
                                  "fp32 on one GPU");
    }
    for (size_t i = 0; i < sources.size(); ++i) {
      const auto& target = targets[i];
      if (!target.is_contiguous() || target.scalar_type() != target_type ||
          target.device() != sources[i].device() || target.numel() != sources[i].numel()) {
        throw std::invalid_argument(std::string(op) + ": target " + std::to_string(i) +
                                    " is not a contiguous " + c10::toString(target_type) +
                                    " tensor of its source's size on its GPU");
      }
      sources_.push_back(sources[i].data_ptr<float>());
      targets_.push_back(target.data_ptr());
      counts_.push_back(sources[i].numel());
    }
  }
  cuda::PartList list() const {
    return {sources_.data(), targets_.data(), counts_.data(), static_cast<int>(sources_.size())};
  }

 private:
  std::vector<const float*> sources_;
  std::vector<void*> targets_;
  std::vector<int64_t> counts_;
};

}  // namespace

void copy_to_bf16(const std::vector<torch::Tensor>& sources,
                  const std::vector<torch::Tensor>& targets) {
  if (sources.empty() && targets.empty()) return;
  const Parts parts(sources, targets, torch::kBFloat16, "copy_to_bf16");
  cuda::to_bf16(parts.list(), stream_of(sources.front()));
}

void moving_average_(const std::vector<torch::Tensor>& averages,
                     const std::vector<torch::Tensor>& values, const torch::Tensor& weight) {
  if (averages.empty() && values.empty()) return;
  const Parts parts(values, averages, torch::kFloat, "moving_average_");
  if (weight.numel() != 1 || weight.scalar_type() != torch::kFloat ||
      weight.device() != values.front().device()) {
    throw std::invalid_argument("moving_average_: expected a one-element fp32 weight on the GPU");
  }
  cuda::moving_average(parts.list(), weight.data_ptr<float>(), stream_of(values.front()));
}

#else  // no CUDA kernels in this build

bool own_kernels_for(const torch::Tensor&) { return false; }
bool own_kernels_enabled() { return false; }

namespace {
[[noreturn]] void unavailable(const char* op) {
  throw std::logic_error(std::string(op) + ": this build has no CUDA kernels (own_kernels_for)");
}
}  // namespace

void token_loss_rows_(torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double,
                      const LossRowsOut&) {
  unavailable("token_loss_rows_");
}
torch::Tensor column_sums(const torch::Tensor&) { unavailable("column_sums"); }
std::pair<torch::Tensor, torch::Tensor> relu_backward_column_sums(const torch::Tensor&,
                                                                  const torch::Tensor&) {
  unavailable("relu_backward_column_sums");
}
torch::Tensor layer_norm_own(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                             double) {
  unavailable("layer_norm_own");
}
bool add_layer_norm_own_for(const torch::Tensor&, const torch::Tensor&) { return false; }
bool own_list_kernels_for(const std::vector<torch::Tensor>&) { return false; }
void copy_to_bf16(const std::vector<torch::Tensor>&, const std::vector<torch::Tensor>&) {
  unavailable("copy_to_bf16");
}
void moving_average_(const std::vector<torch::Tensor>&, const std::vector<torch::Tensor>&,
                     const torch::Tensor&) {
  unavailable("moving_average_");
}
torch::Tensor add_layer_norm_own(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                 const torch::Tensor&, double, double) {
  unavailable("add_layer_norm_own");
}

#endif

}  // namespace tandem::kernels
