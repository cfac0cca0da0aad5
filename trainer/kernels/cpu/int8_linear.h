// Linear layers in int8 for decoding on the generic path (cpu_path.h: CPUs without AVX2, or
// TANDEM_CPU_KERNELS=generic), through LibTorch's dynamically quantized matrix product.
#pragma once

#include <ATen/core/ivalue.h>
#include <torch/torch.h>

#include <cstdint>

namespace tandem::kernels {

// Linear layers in int8 for decoding on the generic path (FrozenLinear's own packed int8 loops
// serve the others): the weight is quantized once, symmetrically with one scale per output row,
// and applied by LibTorch's dynamically quantized matrix product (its oneDNN or FBGEMM kernels),
// which quantizes the input
// rows at every call with one scale and zero point per product, to 8 bits on CPUs with VNNI
// instructions and to 7 bits on the others (whose u8 x s8 instruction sums pairs into 16 bits,
// which 8-bit inputs can overflow).

// A weight as Tandem's int8 layers hold it (FrozenLinear's packed panels, a LoRA base held in
// int8): symmetric, one scale per row, the row's largest magnitude mapped to 127 (an all-zero row
// gets scale 1), value ≈ q · scale with q = round-half-even(value / scale) in [-127, 127].
struct RowQuantized {
  torch::Tensor values;  // int8 [rows, cols]
  torch::Tensor scales;  // float32 [rows]
};
// weight [rows, cols] float32, on any device.
RowQuantized quantize_rows(const torch::Tensor& weight);

// Whether this CPU has VNNI instructions (AVX512-VNNI or AVX-VNNI): then inputs get all 8 bits.
bool cpu_has_vnni();

class Int8Linear {
 public:
  Int8Linear() = default;
  // weight [out, in] and bias [out], float; copied, so later changes to them do not show. The
  // first one picks LibTorch's int8 engine (FBGEMM, else oneDNN); std::runtime_error naming the
  // engines it has when neither is there.
  Int8Linear(const torch::Tensor& weight, const torch::Tensor& bias);

  bool defined() const { return out_features_ > 0; }
  // x [..., in] float → x · weightᵀ + bias [..., out] float (no gradient).
  torch::Tensor operator()(const torch::Tensor& x) const;

 private:
  c10::IValue packed_;  // LibTorch's LinearPackedParamsBase
  int64_t out_features_ = 0;
  bool reduce_range_ = true;
};

}  // namespace tandem::kernels
