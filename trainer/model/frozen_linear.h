// Linear layers whose weights are fixed for inference (tandem-decode, tandem-eval), packed once at
// load so that no matrix product repacks them: fp32 panels, or int8 on CPUs with AVX-512 VNNI.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/model/int8_linear.h"

namespace tandem::model {

// Linear layers whose weights are fixed for inference (tandem-decode, tandem-eval): prepared once
// at load, so that no matrix product repacks them.
// - fp32: the weight packed into panels of 16 output columns, each panel's [in, 16] block
//   contiguous, multiplied by a register-tiled AVX2/FMA loop (6 rows x 16 columns per tile). A
//   BLAS sgemm packs both operands at every call; at decoding's few hundred rows that packing and
//   its memory traffic cost as much as ~15 % of the product. CPUs without AVX2 and FMA take
//   linear_rows (BLAS) on a plain copy instead.
// - int8: on CPUs with AVX-512 VNNI, the weight quantized once (symmetric, one scale per output
//   row) and packed into panels of 32 columns, times the input quantized per call (one scale per
//   row, 8 bits, offset by 128 as VNNI's u8 x s8 product wants; the offset's share is subtracted
//   exactly), by a 6 x 32 tile loop of vpdpbusd with 32-bit sums. Elsewhere Int8Linear
//   (LibTorch's quantized kernels).

enum class InferencePrecision { kFp32, kInt8 };

// Whether this CPU runs the packed fp32 loop (AVX2 and FMA); otherwise fp32 falls back to BLAS.
bool cpu_has_packed_fp32();

// Whether this CPU runs the packed int8 loop (AVX-512 F, BW, VL and VNNI).
bool cpu_has_packed_int8();

class FrozenLinear {
 public:
  // weight [out, in] and bias [out], float, on the CPU or not; copied to the CPU, so later
  // changes to them do not show.
  FrozenLinear(const torch::Tensor& weight, const torch::Tensor& bias,
               InferencePrecision precision);

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
  // Whether a packed loop runs this layer (else LibTorch: Int8Linear, or BLAS without AVX2).
  bool packed() const { return !panels_.empty() || !panels8_.empty(); }
  // The packed loops: contiguous rows [n, in] → y [n, out] (row stride out).
  void packed_product(const torch::Tensor& rows, float* y) const;
  void packed_fp32(const torch::Tensor& rows, float* y) const;
  void pack_int8(const torch::Tensor& weight, const torch::Tensor& bias);
  void packed_int8(const torch::Tensor& rows, float* y) const;

  InferencePrecision precision_;
  int64_t in_ = 0, out_ = 0;
  Int8Linear int8_;
  std::vector<float> panels_;          // [ceil(out / 16), in, 16], columns past `out` zero
  std::vector<float> bias_;            // [ceil(out / panel) * panel], zero past `out`
  std::vector<int8_t> panels8_;  // int8: [ceil(out / 32), ceil(in / 4), 32, 4], zero past the edges
  std::vector<int32_t> comp_;    // int8: 128 x the sum of each output row's quantized weights
  std::vector<float> scales_;    // int8: each output row's weight scale
  torch::Tensor weight_, plain_bias_;  // the BLAS fallback's copies (no AVX2/FMA)
};

}  // namespace tandem::model
