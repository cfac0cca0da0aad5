// The register tiles of the packed products, written once over an instruction set's vector type
// and instantiated by each instruction set's translation unit (avx2.cpp, avx_vnni.cpp, avx512.cpp,
// avx512_vnni.cpp), which is compiled for those instructions alone. Include it nowhere else:
// everything here has internal linkage, so no function compiled for one instruction set is ever
// shared with the code of another.
#pragma once

#include <algorithm>
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

// How a tile fetches its share of the next panel ahead: spread over its loop (Spread), or not
// at all (NoSpread: panel_rows fetched the share at once before it). Either has step(depth), called
// once per step of a loop `depth` steps long.
struct Spread {
  const char* at = nullptr;  // the next line to fetch
  int64_t lines = 0;         // lines to fetch over the loop, evenly
  int64_t owed = 0;          // lines x steps taken, less depth per line fetched
  void step(int64_t depth) {
    for (owed += lines; owed >= depth; owed -= depth, at += 64) __builtin_prefetch(at, 0, 2);
  }
};
struct NoSpread {
  void step(int64_t /*depth*/) {}
};

// Whether a panel of `tiles` tiles spreads its fetches over the tiles' loops. A burst of
// prefetches held the fill buffers that the tile's own loads then waited for: FrozenLinear timed
// alone (2026-12-06, the 2-core Xeon development VM, weights from L3, 512 x 2,048) streamed ~22
// GB/s of weights at 1 row and ~14 at 8 with bursts, ~29 and ~25 spread, against ~28 GB/s for a
// plain read loop. fp32 always spreads (at 60 rows too it ran as fast or faster); int8's tighter
// loop keeps the burst past 2 tiles, where counting the spread cost it ~5 %.
enum class Spreading { kAlways, kFewTiles };
constexpr int64_t kFewTiles = 2;

// Rows [0, rows) of one panel: run(r, std::integral_constant<int, R>, fetch) computes rows
// [r, r + R), a full tile of Rows at a time, then the rest; each tile's share of the `lines` cache
// lines at `next` (the thread's next panel, or null) is fetched ahead while it runs, as `fetch`
// (Spread or NoSpread) says: a panel's first tile would otherwise wait on memory at every step.
template <int Rows, Spreading How, typename Run>
inline void panel_rows(int64_t rows, const char* next, int64_t lines, const Run& run) {
  const int64_t tiles = (rows + Rows - 1) / Rows;
  const int64_t share = next != nullptr ? (lines + tiles - 1) / tiles : 0;
  auto each_tile = [&](auto spread) {
    int64_t fetched = 0;
    auto tile = [&](int64_t r, auto R) {
      const int64_t begin = fetched, end = std::min(begin + share, lines);
      fetched = end;
      if constexpr (decltype(spread)::value) {
        run(r, R, Spread{next + begin * 64, end - begin});
      } else {
        for (int64_t i = begin; i < end; ++i) __builtin_prefetch(next + i * 64, 0, 2);
        run(r, R, NoSpread{});
      }
    };
    int64_t r = 0;
    for (; r + Rows <= rows; r += Rows) tile(r, std::integral_constant<int, Rows>());
    rest_of_panel<Rows - 1>(rows - r, r, tile);
  };
  if (How == Spreading::kAlways || tiles <= kFewTiles) {
    each_tile(std::true_type());
  } else {
    each_tile(std::false_type());
  }
}

// Row results v0 | v1 (2 x T::kWidth lanes of T, a float vector F or an int8 tile's integer one
// I) into a row of floats, of which `cols` columns are real; an integer tile keeps its 32-bit
// sums there between passes. And back (load_row).
template <class T>
inline void store_row(float* out, typename T::V v0, typename T::V v1, int64_t cols) {
  if (cols == 2 * T::kWidth) {
    T::store(out, v0);
    T::store(out + T::kWidth, v1);
  } else {
    alignas(64) float full[2 * T::kWidth];
    T::store(full, v0);
    T::store(full + T::kWidth, v1);
    std::memcpy(out, full, cols * sizeof(float));
  }
}

template <class T>
inline void load_row(const float* in, typename T::V& v0, typename T::V& v1, int64_t cols) {
  if (cols == 2 * T::kWidth) {
    v0 = T::load(in);
    v1 = T::load(in + T::kWidth);
  } else {
    alignas(64) float full[2 * T::kWidth] = {};
    std::memcpy(full, in, cols * sizeof(float));
    v0 = T::load(full);
    v1 = T::load(full + T::kWidth);
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

// The inputs of a panel's tiles per pass: its first pass sums inputs [0, 256) of every row, the
// next [256, 512), and so on, each tile's sums kept in y between passes. A pass's share of a
// 32-column panel (32 KB) stays in L1 while every tile of rows reads it; a whole panel of a model's
// feed-forward output (d_ff inputs: 128-256 KB) does not, and each tile read it again from L2.
constexpr int64_t kPassInputs = 256;

// Rows x[0..R) (stride ldx) times the `depth` inputs of panel p from p (2 x kWidth floats per
// input) into y[0..R) (stride ldy): the sums start from bias b, or with b null from y's values
// (an earlier pass's). Every output is the in-order FMA sum of its products: a pass continues it.
template <class F, int R, class Fetch>
inline void fp32_tile(const float* x, int64_t ldx, const float* p, int64_t depth, const float* b,
                      float* y, int64_t ldy, int64_t cols, Fetch fetch) {
  static_assert(R >= 1 && R <= kMaxTileRows, "rows per tile");
  constexpr int64_t kPanel = 2 * F::kWidth;
  // Named accumulators (not an array) keep them in registers through the loop; each_row(f) runs
  // f(r, row r's pair) for the tile's R rows.
  typename F::V a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51;
  auto each_row = [&](const auto& f) {
    f(0, a00, a01);
    if constexpr (R > 1) f(1, a10, a11);
    if constexpr (R > 2) f(2, a20, a21);
    if constexpr (R > 3) f(3, a30, a31);
    if constexpr (R > 4) f(4, a40, a41);
    if constexpr (R > 5) f(5, a50, a51);
  };
  each_row([&](int64_t r, typename F::V& a0, typename F::V& a1) {
    if (b != nullptr) {
      a0 = F::load(b);
      a1 = F::load(b + F::kWidth);
    } else {
      load_row<F>(y + r * ldy, a0, a1, cols);
    }
  });
  for (int64_t k = 0; k < depth; ++k) {
    fetch.step(depth);
    const auto w0 = F::load(p + k * kPanel), w1 = F::load(p + k * kPanel + F::kWidth);
    each_row([&](int64_t r, typename F::V& a0, typename F::V& a1) {
      fma_row<F>(x + r * ldx + k, w0, w1, a0, a1);
    });
  }
  each_row([&](int64_t r, typename F::V& a0, typename F::V& a1) {
    store_row<F>(y + r * ldy, a0, a1, cols);
  });
}

// A panel's job.depth in passes of `step`: pass(from, depth, next, lines) for each, the next
// panel's lines (next, lines: its share of them) fetched ahead a share per pass.
template <typename Pass>
inline void panel_passes(const PanelJob& job, int64_t step, const Pass& pass) {
  const int64_t passes = (job.depth + step - 1) / step;
  for (int64_t i = 0; i < passes; ++i) {
    const int64_t from = i * step, first = job.next_lines * i / passes;
    pass(from, std::min(step, job.depth - from), job.next ? job.next + first * 64 : nullptr,
         job.next_lines * (i + 1) / passes - first);
  }
}

template <class F, int Rows>
void fp32_product(const PanelJob& job) {
  constexpr int64_t kPanel = 2 * F::kWidth;
  const auto* x = static_cast<const float*>(job.x);
  const auto* p = static_cast<const float*>(job.panel);
  panel_passes(job, kPassInputs, [&](int64_t k0, int64_t depth, const char* next, int64_t lines) {
    panel_rows<Rows, Spreading::kAlways>(job.rows, next, lines, [&](int64_t r, auto R, auto fetch) {
      fp32_tile<F, decltype(R)::value>(x + r * job.ldx + k0, job.ldx, p + k0 * kPanel, depth,
                                       k0 == 0 ? job.bias : nullptr, job.y + r * job.ldy, job.ldy,
                                       job.cols, fetch);
    });
  });
}

// int8. I: the integer vector (V, kWidth 32-bit lanes, zero, load, store, sub, to_float, dot) with
// its float vector I::F. A panel is 2 x kWidth columns, each quad of a column's weights 4 bytes.

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

// The quads of a panel's int8 tiles per pass (1,024 inputs): as fp32's kPassInputs, a pass's share
// of a 32-column panel (32 KB) stays in L1; the integer sums are exact in any order.
constexpr int64_t kPassQuads = 256;

// Rows x[0..R) (stride job.ldx) times quads [q0, q0 + depth) of the panel into y[0..R): the sums
// start from zero on the first pass, else from what the last pass left in y, and the last pass
// writes the outputs.
template <class I, int R, class Fetch>
inline void int8_tile(const uint8_t* x, const float* xs, const PanelJob& job, int64_t q0,
                      int64_t depth, float* y, Fetch fetch) {
  static_assert(R >= 1 && R <= kMaxTileRows, "rows per tile");
  constexpr int64_t kQuadBytes = 4 * 2 * I::kWidth;
  const int64_t ldx = job.ldx, ldy = job.ldy;
  const auto* p = static_cast<const int8_t*>(job.panel) + q0 * kQuadBytes;
  x += 4 * q0;
  typename I::V a[R][2];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (q0 == 0) {
      a[r][0] = a[r][1] = I::zero();
    } else {
      load_row<I>(y + r * ldy, a[r][0], a[r][1], job.cols);
    }
  }
  for (int64_t q = 0; q < depth; ++q) {
    fetch.step(depth);
    const auto w0 = I::load(p + q * kQuadBytes), w1 = I::load(p + q * kQuadBytes + 4 * I::kWidth);
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) I::dot(x + r * ldx + 4 * q, w0, w1, a[r][0], a[r][1]);
  }
  const bool last = q0 + depth == job.depth;
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
    if (last) {
      int8_row_out<I>(a[r][0], a[r][1], xs[r], job, y + r * ldy);
    } else {
      store_row<I>(y + r * ldy, a[r][0], a[r][1], job.cols);
    }
  }
}

template <class I, int Rows>
void int8_product(const PanelJob& job) {
  const auto* x = static_cast<const uint8_t*>(job.x);
  panel_passes(job, kPassQuads, [&](int64_t q0, int64_t depth, const char* next, int64_t lines) {
    panel_rows<Rows, Spreading::kFewTiles>(
        job.rows, next, lines, [&](int64_t r, auto R, auto fetch) {
          int8_tile<I, decltype(R)::value>(x + r * job.ldx, job.x_scales + r, job, q0, depth,
                                           job.y + r * job.ldy, fetch);
        });
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
