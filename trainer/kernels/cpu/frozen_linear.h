// Linear layers whose weights are fixed for inference (tandem-decode, tandem-eval), packed once at
// load so that no matrix product repacks them, in fp32 or int8, by the CPU's own instructions.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/kernels/cpu/cpu_path.h"
#include "trainer/kernels/cpu/int8_linear.h"
#include "trainer/kernels/cpu/panel_kernels.h"

namespace tandem::kernels {

// Linear layers whose weights are fixed for inference (tandem-decode, tandem-eval): prepared once
// at load, so that no matrix product repacks them. The loops are the instruction sets' own
// (panel_kernels.h), chosen by cpu_path.h from the CPU (or TANDEM_CPU_KERNELS):
// - fp32: the weight packed into panels of 16 output columns (avx2) or 32 (avx512), each panel's
//   [in, panel] block contiguous, multiplied by register tiles of 6 rows x 2 vector registers. A
//   BLAS sgemm packs both operands at every call; at decoding's few hundred rows that packing and
//   its memory traffic cost as much as ~15 % of the product. The generic path (no AVX2 and FMA)
//   takes linear_rows (BLAS) on a plain copy instead.
// - int8: the weight quantized once, symmetrically with one scale per output row (CTranslate2's
//   scheme, so an exported int8 model holds the same weights), packed into panels of 16 (avx2,
//   avx_vnni) or 32 (avx512_vnni) columns; each product's input rows are quantized per call the
//   same way (one scale per row; 8 bits, 7 on avx2), and the integer products summed exactly in
//   32 bits. The generic path takes Int8Linear (LibTorch's quantized kernels).

enum class InferencePrecision { kFp32, kInt8 };

// Whether fp32 runs a packed loop here (the avx2 path or above); otherwise it falls back to BLAS.
bool cpu_has_packed_fp32();

class FrozenLinear {
 public:
  // weight [out, in] and bias [out], float, on the CPU or not; copied to the CPU, so later
  // changes to them do not show. `path` bounds the instruction sets used (cpu_path.h): cpu_path()
  // unless a test asks for a lower one.
  FrozenLinear(const torch::Tensor& weight, const torch::Tensor& bias, InferencePrecision precision,
               CpuPath path = cpu_path());

  // The path this layer's product takes (fp32_path or int8_path of the bound).
  CpuPath path() const { return path_; }
  // int8 on a packed path: the largest magnitude of a quantized input, in steps (127, or 63 on
  // avx2, whose 16-bit pair sums 8-bit inputs could overflow).
  float input_levels() const { return kernels_ != nullptr ? kernels_->input_levels : 127; }

  // x [..., in] float on the CPU → x · weightᵀ + bias [..., out] float (no gradient).
  torch::Tensor operator()(const torch::Tensor& x) const;

  // The same written into y [rows of x, out] (contiguous float on the CPU, e.g. a block of rows of
  // a larger result): the packed loops allocate nothing for it, so a caller running a product a
  // block of rows at a time reuses one buffer.
  void operator()(const torch::Tensor& x, const torch::Tensor& y) const;

 private:
  // x [..., in], checked to be float on the CPU, as contiguous rows [n, in]; and a result
  // [n, out] of them back as [..., out].
  torch::Tensor input_rows(const torch::Tensor& x) const;
  torch::Tensor shaped_like(const torch::Tensor& y, const torch::Tensor& x) const;
  // Whether a packed loop runs this layer (else LibTorch: Int8Linear, or BLAS).
  bool packed() const { return kernels_ != nullptr; }
  void pack_fp32(const torch::Tensor& weight);
  void pack_int8(const torch::Tensor& weight);
  // The packed loops: contiguous rows [n, in] → y [n, out] (row stride out).
  void packed_product(const torch::Tensor& rows, float* y) const;

  InferencePrecision precision_;
  CpuPath path_;
  int64_t in_ = 0, out_ = 0;
  const PanelKernels* kernels_ = nullptr;  // null: not packed
  Int8Linear int8_;
  std::vector<float> panels_;    // fp32: [ceil(out / panel), in, panel], zero past `out`
  std::vector<int8_t> panels8_;  // int8: [ceil(out / panel), ceil(in / 4), panel, 4], zero past
  std::vector<float> bias_;      // [ceil(out / panel) * panel], zero past `out`
  std::vector<int32_t> offset_sums_;  // int8: the input offset x each row's weight sum
  std::vector<float> scales_;    // int8: each output row's weight scale
  torch::Tensor weight_, plain_bias_;  // the generic path's copies
};

}  // namespace tandem::kernels
