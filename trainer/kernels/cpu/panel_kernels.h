// The packed matrix products' inner loops, one set per instruction set (avx2.cpp, avx_vnni.cpp,
// avx512.cpp, avx512_vnni.cpp, each compiled for its own instructions), as FrozenLinear calls
// them: one panel of output columns over a block of input rows.
#pragma once

#include <cstdint>

namespace tandem::kernels {

// One panel times a block of rows. The weights are packed in panels of `panel` output columns
// (PanelKernels::panel): fp32 [in, panel] (k-major), int8 [quads, panel, 4] (four consecutive
// inputs' weights of one column together), zero past the matrix's edges.
struct PanelJob {
  const void* x = nullptr;  // the rows' inputs: float [rows, ldx], or 8-bit [rows, ldx]
  int64_t ldx = 0;          // their row stride, in elements
  int64_t rows = 0;
  const void* panel = nullptr;
  int64_t depth = 0;                     // fp32: in; int8: quads (in / 4, rounded up)
  const float* bias = nullptr;           // [panel]
  const float* x_scales = nullptr;       // int8: [rows], each row's input scale
  const float* w_scales = nullptr;       // int8: [panel], each column's weight scale
  const int32_t* offset_sums = nullptr;  // int8: [panel], input_zero x Σ weights
  float* y = nullptr;  // [rows, ldy], of which the first `cols` columns are written
  int64_t ldy = 0;
  int64_t cols = 0;
  const char* next = nullptr;  // the next panel this thread multiplies (fetched ahead), or null
  int64_t next_lines = 0;      // its size in 64-byte lines
};

// An instruction set's kernels. fp32: every output is the in-order FMA sum of its products,
// started from the bias. int8: each input row is quantized to [-L, L], L = input_levels, with a
// scale of its own (max |x| / L; rounded to nearest even), and written as unsigned bytes offset by
// input_zero; y = (Σ q_x q_w) · w scale · x scale + bias, the integer sum exact (the offset's
// share, input_zero x each column's weight sum, subtracted).
struct PanelKernels {
  int64_t panel = 0;         // output columns per panel
  int32_t input_zero = 0;    // int8: the offset of the input bytes
  float input_levels = 127;  // int8: the largest input magnitude, in steps
  void (*product)(const PanelJob& job) = nullptr;
  // int8: x [n] → out [padded] (n <= padded, the rest input_zero), returning the scale.
  float (*quantize)(const float* x, int64_t n, int64_t padded, uint8_t* out) = nullptr;
};

// What each instruction set's translation unit defines.
namespace avx2 {
extern const PanelKernels kFp32, kInt8;
}
namespace avx_vnni {
extern const PanelKernels kInt8;
}
namespace avx512 {
extern const PanelKernels kFp32;
}
namespace avx512_vnni {
extern const PanelKernels kInt8;
}

}  // namespace tandem::kernels
