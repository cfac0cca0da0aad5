// The register tiles of the packed products, written once over an instruction set's vector type
// and instantiated by each instruction set's translation unit (avx2.cpp, avx_vnni.cpp, avx512.cpp,
// avx512_vnni.cpp), which is compiled for those instructions alone. Include it nowhere else:
// everything here has internal linkage, so no function compiled for one instruction set is ever
// shared with the code of another.
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "trainer/kernels/cpu/panel_kernels.h"

namespace tandem::kernels {
namespace {

constexpr int kMaxTileRows = 6;  // the tiles' named accumulators: up to 6 rows of 2 registers

// The last `left` (< Rows) rows of a panel, from row r: run(r, integral_constant<int, left>).
template <int R, typename Run>
inline void rest_of_panel(int64_t left, int64_t r, const Run& run) {
  if constexpr (R > 0) {
    if (left == R) {
      run(r, std::integral_constant<int, R>());
    } else {
      rest_of_panel<R - 1>(left, r, run);
    }
  }
}

// Rows [0, rows) of one panel: run(r, std::integral_constant<int, R>) computes rows [r, r + R),
// a full tile of Rows at a time, then the rest. While they run, the `lines` cache lines at `next`
// (the thread's next panel, or null) are fetched ahead, a share per tile: a panel's first tile
// would otherwise wait on memory at every step.
template <int Rows, typename Run>
inline void panel_rows(int64_t rows, const char* next, int64_t lines, const Run& run) {
  const int64_t tiles = (rows + Rows - 1) / Rows;
  const int64_t share = (lines + tiles - 1) / tiles;
  int64_t fetched = 0;
  auto fetch_share = [&] {
    if (next == nullptr) return;
    const int64_t end = fetched + share < lines ? fetched + share : lines;
    for (; fetched < end; ++fetched) __builtin_prefetch(next + fetched * 64, 0, 2);
  };
  int64_t r = 0;
  for (; r + Rows <= rows; r += Rows) {
    fetch_share();
    run(r, std::integral_constant<int, Rows>());
  }
  fetch_share();
  rest_of_panel<Rows - 1>(rows - r, r, run);
}

// Row r's results v0 | v1 (2 x F::kWidth floats) into out, of which `cols` columns are real.
template <class F>
inline void store_row(float* out, typename F::V v0, typename F::V v1, int64_t cols) {
  if (cols == 2 * F::kWidth) {
    F::store(out, v0);
    F::store(out + F::kWidth, v1);
  } else {
    alignas(64) float full[2 * F::kWidth];
    F::store(full, v0);
    F::store(full + F::kWidth, v1);
    std::memcpy(out, full, cols * sizeof(float));
  }
}

// fp32. F: the float vector (V, kWidth, load, store, broadcast, fmadd). A panel is 2 x kWidth
// columns; a tile R rows of it.
template <class F>
inline void fma_row(const float* x, typename F::V w0, typename F::V w1, typename F::V& a0,
                    typename F::V& a1) {
  const auto v = F::broadcast(x);
  a0 = F::fmadd(v, w0, a0);
  a1 = F::fmadd(v, w1, a1);
}

// Rows x[0..R) (stride ldx) times panel p [in, 2 x kWidth] plus bias b into y[0..R) (stride ldy).
// Every output is the in-order FMA sum of its products, started from the bias.
template <class F, int R>
inline void fp32_tile(const float* x, int64_t ldx, const float* p, int64_t in, const float* b,
                      float* y, int64_t ldy, int64_t cols) {
  static_assert(R >= 1 && R <= kMaxTileRows, "rows per tile");
  constexpr int64_t kPanel = 2 * F::kWidth;
  // Named accumulators (not an array) keep them in registers through the loop.
  const auto b0 = F::load(b), b1 = F::load(b + F::kWidth);
  auto a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1;
  auto a30 = b0, a31 = b1, a40 = b0, a41 = b1, a50 = b0, a51 = b1;
  for (int64_t k = 0; k < in; ++k) {
    const auto w0 = F::load(p + k * kPanel), w1 = F::load(p + k * kPanel + F::kWidth);
    fma_row<F>(x + k, w0, w1, a00, a01);
    if (R > 1) fma_row<F>(x + ldx + k, w0, w1, a10, a11);
    if (R > 2) fma_row<F>(x + 2 * ldx + k, w0, w1, a20, a21);
    if (R > 3) fma_row<F>(x + 3 * ldx + k, w0, w1, a30, a31);
    if (R > 4) fma_row<F>(x + 4 * ldx + k, w0, w1, a40, a41);
    if (R > 5) fma_row<F>(x + 5 * ldx + k, w0, w1, a50, a51);
  }
  store_row<F>(y, a00, a01, cols);
  if (R > 1) store_row<F>(y + ldy, a10, a11, cols);
  if (R > 2) store_row<F>(y + 2 * ldy, a20, a21, cols);
  if (R > 3) store_row<F>(y + 3 * ldy, a30, a31, cols);
  if (R > 4) store_row<F>(y + 4 * ldy, a40, a41, cols);
  if (R > 5) store_row<F>(y + 5 * ldy, a50, a51, cols);
}

template <class F, int Rows>
void fp32_product(const PanelJob& job) {
  const auto* x = static_cast<const float*>(job.x);
  const auto* p = static_cast<const float*>(job.panel);
  panel_rows<Rows>(job.rows, job.next, job.next_lines, [&](int64_t r, auto R) {
    fp32_tile<F, decltype(R)::value>(x + r * job.ldx, job.ldx, p, job.depth, job.bias,
                                     job.y + r * job.ldy, job.ldy, job.cols);
  });
}

// int8. I: the integer vector (V, kWidth 32-bit lanes, zero, load, sub, to_float, dot) with its
// float vector I::F. A panel is 2 x kWidth columns, each quad of a column's weights 4 bytes.

// Row r's sums c0 | c1 → (c - offset sums) · w scales · x scale + bias, into out.
template <class I>
inline void int8_row_out(typename I::V c0, typename I::V c1, float x_scale, const PanelJob& job,
                         float* out) {
  using F = typename I::F;
  const auto scale = F::set1(x_scale);
  typename F::V v[2];
  const typename I::V sums[2] = {c0, c1};
  for (int h = 0; h < 2; ++h) {
    const auto exact = I::sub(sums[h], I::load(job.offset_sums + I::kWidth * h));
    v[h] = F::fmadd(F::mul(I::to_float(exact), F::load(job.w_scales + I::kWidth * h)), scale,
                    F::load(job.bias + I::kWidth * h));
  }
  store_row<F>(out, v[0], v[1], job.cols);
}

template <class I, int R>
inline void int8_tile(const uint8_t* x, const float* xs, const PanelJob& job, float* y) {
  static_assert(R >= 1 && R <= kMaxTileRows, "rows per tile");
  constexpr int64_t kQuadBytes = 4 * 2 * I::kWidth;
  const int64_t ldx = job.ldx;
  const auto* p = static_cast<const int8_t*>(job.panel);
  typename I::V a[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) a[r][0] = a[r][1] = I::zero();
  for (int64_t q = 0; q < job.depth; ++q) {
    const auto w0 = I::load(p + q * kQuadBytes), w1 = I::load(p + q * kQuadBytes + 4 * I::kWidth);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) I::dot(x + r * ldx + 4 * q, w0, w1, a[r][0], a[r][1]);
  }
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) int8_row_out<I>(a[r][0], a[r][1], xs[r], job, y + r * job.ldy);
}

template <class I, int Rows>
void int8_product(const PanelJob& job) {
  const auto* x = static_cast<const uint8_t*>(job.x);
  panel_rows<Rows>(job.rows, job.next, job.next_lines, [&](int64_t r, auto R) {
    int8_tile<I, decltype(R)::value>(x + r * job.ldx, job.x_scales + r, job, job.y + r * job.ldy);
  });
}

// A 4-byte group of inputs as one 32-bit lane, to broadcast.
inline int32_t four_bytes(const uint8_t* x) {
  int32_t four;
  std::memcpy(&four, x, sizeof four);
  return four;
}

// The scalar part of quantizing a row: its largest magnitude from `top` on, and the byte of one
// input (to nearest even, offset by `zero`).
inline float row_max(const float* x, int64_t from, int64_t n, float top) {
  for (int64_t k = from; k < n; ++k) {
    const float m = __builtin_fabsf(x[k]);
    top = m > top ? m : top;
  }
  return top;
}

inline uint8_t quantize_one(float x, float inv, int32_t zero) {
  return static_cast<uint8_t>(static_cast<int32_t>(__builtin_nearbyintf(x * inv)) + zero);
}

}  // namespace
}  // namespace tandem::kernels
