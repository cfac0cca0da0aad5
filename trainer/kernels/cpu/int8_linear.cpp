#include "trainer/kernels/cpu/int8_linear.h"

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>
#include <string>

#include "trainer/kernels/cpu/cpu_path.h"

namespace tandem::kernels {
namespace {

// LibTorch's quantized operators, looked up by name (their packed weights are a TorchScript
// class, passed as an IValue).
c10::OperatorHandle quantized_op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "");
}

void select_int8_engine() {
  auto& context = at::globalContext();
  std::string found;
  for (const auto engine : {at::QEngine::FBGEMM, at::QEngine::ONEDNN}) {
    for (const auto supported : context.supportedQEngines()) {
      if (supported == engine) {
        context.setQEngine(engine);
        return;
      }
    }
  }
  for (const auto supported : context.supportedQEngines()) {
    found += (found.empty() ? "" : ", ") + c10::toString(supported);
  }
  throw std::runtime_error(
      "int8 decoding needs LibTorch's FBGEMM or oneDNN quantized engine; "
      "this LibTorch has " +
      (found.empty() ? "none" : found));
}

}  // namespace

RowQuantized quantize_rows(const torch::Tensor& weight) {
  torch::NoGradGuard no_grad;
  const int64_t rows = weight.size(0), cols = weight.size(1);
  RowQuantized out{torch::empty({rows, cols}, weight.options().dtype(torch::kChar)),
                   torch::empty({rows}, weight.options().dtype(torch::kFloat))};
  // A block of rows at a time, so that the float temporaries stay small beside a weight as large
  // as NLLB-200's 256k-row embedding.
  const int64_t block = std::max<int64_t>(1, (int64_t{1} << 20) / std::max<int64_t>(1, cols));
  for (int64_t begin = 0; begin < rows; begin += block) {
    const int64_t n = std::min(block, rows - begin);
    const auto w = weight.narrow(0, begin, n).to(torch::kFloat);
    const auto top = w.abs().amax(1);
    const auto scales = torch::where(top.gt(0), top / 127.0F, torch::ones_like(top));
    out.scales.narrow(0, begin, n).copy_(scales);
    // round() is half to even, as std::nearbyint in the default rounding mode.
    out.values.narrow(0, begin, n).copy_((w / scales.unsqueeze(1)).round_().clamp_(-127, 127));
  }
  return out;
}

bool cpu_has_vnni() {
  return cpu_executes(CpuPath::kAvx512Vnni) || cpu_executes(CpuPath::kAvxVnni);
}

Int8Linear::Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias)
    : out_features_(weight.size(0)), reduce_range_(!cpu_has_vnni()) {
  static std::once_flag selected;
  std::call_once(selected, select_int8_engine);
  torch::NoGradGuard no_grad;
  const auto w = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
  // Symmetric per row: the row's largest magnitude maps to 127 (an all-zero row gets scale 1).
  auto scales = w.abs().amax(1).div(127.0);
  scales.masked_fill_(scales.eq(0), 1.0);
  const auto quantized = torch::quantize_per_channel(
      w, scales.to(torch::kDouble), torch::zeros({out_features_}, torch::kLong), 0, torch::kQInt8);
  torch::jit::Stack stack{quantized, bias.detach().to(torch::kCPU, torch::kFloat).contiguous()};
  quantized_op("quantized::linear_prepack").callBoxed(&stack);
  packed_ = std::move(stack.at(0));
}

torch::Tensor Int8Linear::operator()(const torch::Tensor& x) const {
  static const auto linear = quantized_op("quantized::linear_dynamic");
  auto sizes = x.sizes().vec();
  torch::jit::Stack stack{x.reshape({-1, x.size(-1)}).contiguous(), packed_, reduce_range_};
  linear.callBoxed(&stack);
  sizes.back() = out_features_;
  return stack.at(0).toTensor().view(sizes);
}

}  // namespace tandem::kernels
