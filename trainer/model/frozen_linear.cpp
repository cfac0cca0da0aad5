#include "trainer/model/frozen_linear.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "trainer/model/kernels.h"

namespace tandem::model {
namespace {

constexpr int64_t kPanel = 16;  // output columns per packed panel: two 8-float registers
constexpr int64_t kTile = 6;    // rows per register tile: 12 accumulators, 2 weights, 1 input
// Rows whose inputs are reused across all panels before the next rows are read: about 384 KB of
// them, which stay in L2 (1-2 MB per core on current x86) while the panels stream through. Each
// block is one pass over the weights, from L3 or memory: at 96 KB a beam-4 step of 240 rows
// streamed each weight three times, and the products ran ~5 % slower.
constexpr int64_t kBlockFloats = 98304;

#define TANDEM_AVX2 __attribute__((target("avx2,fma")))

// One row's step k of a tile: its input x[k] times the panel's 16 weights w0 | w1, into a0 | a1.
TANDEM_AVX2 inline __attribute__((always_inline)) void row_fma(const float* x, __m256 w0, __m256 w1,
                                                               __m256& a0, __m256& a1) {
  const __m256 v = _mm256_broadcast_ss(x);
  a0 = _mm256_fmadd_ps(v, w0, a0);
  a1 = _mm256_fmadd_ps(v, w1, a1);
}

// One tile: rows x[0..R) (row stride ldx) times one panel p [in, 16] plus bias b [16], into
// y[0..R) (row stride ldy), of which the first `cols` columns are real. Every output is the
// in-order FMA sum of its products, started from the bias.
template <int R>
TANDEM_AVX2 void tile(const float* x, int64_t ldx, const float* p, int64_t in, const float* b,
                      float* y, int64_t ldy, int64_t cols) {
  static_assert(R >= 1 && R <= kTile, "rows per tile");
  // Named accumulators (not an array) keep them in registers through the loop.
  const __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
  __m256 a00 = b0, a01 = b1, a10 = b0, a11 = b1, a20 = b0, a21 = b1;
  __m256 a30 = b0, a31 = b1, a40 = b0, a41 = b1, a50 = b0, a51 = b1;
  for (int64_t k = 0; k < in; ++k) {
    const __m256 w0 = _mm256_loadu_ps(p + k * kPanel), w1 = _mm256_loadu_ps(p + k * kPanel + 8);
    row_fma(x + k, w0, w1, a00, a01);
    if (R > 1) row_fma(x + ldx + k, w0, w1, a10, a11);
    if (R > 2) row_fma(x + 2 * ldx + k, w0, w1, a20, a21);
    if (R > 3) row_fma(x + 3 * ldx + k, w0, w1, a30, a31);
    if (R > 4) row_fma(x + 4 * ldx + k, w0, w1, a40, a41);
    if (R > 5) row_fma(x + 5 * ldx + k, w0, w1, a50, a51);
  }
  const __m256 acc[kTile][2] = {{a00, a01}, {a10, a11}, {a20, a21},
                                {a30, a31}, {a40, a41}, {a50, a51}};
  for (int r = 0; r < R; ++r) {
    float* out = y + r * ldy;
    if (cols == kPanel) {
      _mm256_storeu_ps(out, acc[r][0]);
      _mm256_storeu_ps(out + 8, acc[r][1]);
    } else {
      alignas(32) float full[kPanel];
      _mm256_store_ps(full, acc[r][0]);
      _mm256_store_ps(full + 8, acc[r][1]);
      std::memcpy(out, full, cols * sizeof(float));
    }
  }
}

// The last `left` (< kTile) rows of a panel, from row r: run(r, integral_constant<int, left>).
template <int R, typename Run>
void rest_of_panel(int64_t left, int64_t r, const Run& run) {
  if constexpr (R > 0) {
    if (left == R) {
      run(r, std::integral_constant<int, R>());
    } else {
      rest_of_panel<R - 1>(left, r, run);
    }
  }
}

// Rows [0, rows) of one panel: run(r, std::integral_constant<int, R>) computes rows [r, r + R),
// a full tile at a time, then the rest. While they run, the `lines` cache lines at `next` (the
// panel after it, or null) are fetched ahead, a share per tile: a panel's first tile would
// otherwise wait on memory at every step.
template <typename Run>
void panel_rows(int64_t rows, const char* next, int64_t lines, const Run& run) {
  const int64_t tiles = (rows + kTile - 1) / kTile;
  const int64_t share = (lines + tiles - 1) / tiles;
  int64_t fetched = 0;
  auto fetch_share = [&] {
    if (!next) return;
    for (const int64_t end = std::min(lines, fetched + share); fetched < end; ++fetched) {
      _mm_prefetch(next + fetched * 64, _MM_HINT_T1);
    }
  };
  int64_t r = 0;
  for (; r + kTile <= rows; r += kTile) {
    fetch_share();
    run(r, std::integral_constant<int, kTile>());
  }
  fetch_share();
  rest_of_panel<kTile - 1>(rows - r, r, run);
}

// Row blocks of `block` rows (their inputs reused from L2 across all panels), and within each,
// the panels split among the intra-op threads: each(r, n, p, next) for rows [r, r + n) of panel
// p, next whether panel p + 1 is this thread's next.
template <typename Each>
void blocks_and_panels(int64_t rows, int64_t block, int64_t panels, const Each& each) {
  for (int64_t r = 0; r < rows; r += block) {
    const int64_t n = std::min(block, rows - r);
    at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) each(r, n, p, p + 1 < end);
    });
  }
}

#define TANDEM_VNNI __attribute__((target("avx2,fma,avx512f,avx512bw,avx512vl,avx512vnni")))

constexpr int64_t kPanel8 = 32;  // int8 panel: output columns per panel, two 16-int registers
constexpr int64_t kZero8 = 128;  // the zero of the unsigned 8-bit inputs
constexpr int64_t kBlockBytes = 98304;  // int8 inputs per row block (see kBlockFloats)

// Row x [n] → u8 [n4] (n4 >= n, a multiple of 16; the rest zeros, i.e. 128) and its scale:
// x[k] ≈ (u8[k] - 128) * scale, rounded to nearest even, |x| at most 127 steps.
TANDEM_VNNI float quantize_row(const float* x, int64_t n, int64_t n4, uint8_t* u8) {
  // The maskz forms of the intrinsics, all lanes on: GCC 12 warns that the plain ones' undefined
  // pass-through operand is uninitialized.
  constexpr __mmask16 kAll = 0xFFFF;
  __m512 top = _mm512_setzero_ps();
  int64_t k = 0;
  for (; k + 16 <= n; k += 16) {
    top = _mm512_maskz_max_ps(kAll, top, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, top);
  float m = *std::max_element(lanes, lanes + 16);
  for (; k < n; ++k) m = std::max(m, std::fabs(x[k]));
  const float inv = m > 0 ? 127.0F / m : 1.0F;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i zero = _mm512_set1_epi32(kZero8);
  for (k = 0; k + 16 <= n; k += 16) {
    const __m512i q = _mm512_maskz_cvtps_epi32(kAll, _mm512_mul_ps(_mm512_loadu_ps(x + k), vinv));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(u8 + k),
                     _mm512_maskz_cvtepi32_epi8(kAll, _mm512_add_epi32(q, zero)));
  }
  for (; k < n; ++k) u8[k] = static_cast<uint8_t>(std::nearbyint(x[k] * inv) + kZero8);
  std::fill(u8 + n, u8 + n4, static_cast<uint8_t>(kZero8));
  return m > 0 ? m / 127.0F : 1.0F;
}

// One row's quad q of an int8 tile: its 4 inputs at x times the panel's 32 x 4 weights w0 | w1,
// summed into c0 | c1.
TANDEM_VNNI inline __attribute__((always_inline)) void row_dot(const uint8_t* x, __m512i w0,
                                                               __m512i w1, __m512i& c0,
                                                               __m512i& c1) {
  int32_t four;
  std::memcpy(&four, x, sizeof four);
  const __m512i v = _mm512_set1_epi32(four);
  c0 = _mm512_dpbusd_epi32(c0, v, w0);
  c1 = _mm512_dpbusd_epi32(c1, v, w1);
}

// One int8 tile: rows u8[0..R) (row stride ldx bytes, scales xs) times panel p [quads, 32, 4]
// → y[0..R) (row stride ldy), first `cols` columns real: (Σ u8·w - comp) · ws · xs + bias, the
// sum exact in 32 bits.
template <int R>
TANDEM_VNNI void tile8(const uint8_t* x, int64_t ldx, const float* xs, const int8_t* p,
                       int64_t quads, const int32_t* comp, const float* ws, const float* b,
                       float* y, int64_t ldy, int64_t cols) {
  static_assert(R >= 1 && R <= kTile, "rows per tile");
  __m512i a00 = _mm512_setzero_si512(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00;
  __m512i a30 = a00, a31 = a00, a40 = a00, a41 = a00, a50 = a00, a51 = a00;
  for (int64_t q = 0; q < quads; ++q) {
    const __m512i w0 = _mm512_loadu_si512(p + q * 4 * kPanel8);
    const __m512i w1 = _mm512_loadu_si512(p + q * 4 * kPanel8 + 64);
    const uint8_t* xq = x + 4 * q;
    row_dot(xq, w0, w1, a00, a01);
    if (R > 1) row_dot(xq + ldx, w0, w1, a10, a11);
    if (R > 2) row_dot(xq + 2 * ldx, w0, w1, a20, a21);
    if (R > 3) row_dot(xq + 3 * ldx, w0, w1, a30, a31);
    if (R > 4) row_dot(xq + 4 * ldx, w0, w1, a40, a41);
    if (R > 5) row_dot(xq + 5 * ldx, w0, w1, a50, a51);
  }
  const __m512i acc[kTile][2] = {{a00, a01}, {a10, a11}, {a20, a21},
                                 {a30, a31}, {a40, a41}, {a50, a51}};
  const __mmask16 m0 = cols >= 16 ? 0xFFFF : static_cast<__mmask16>((1U << cols) - 1);
  const __mmask16 m1 = cols >= 32   ? 0xFFFF
                       : cols <= 16 ? 0
                                    : static_cast<__mmask16>((1U << (cols - 16)) - 1);
  for (int r = 0; r < R; ++r) {
    const __m512 scale = _mm512_set1_ps(xs[r]);
    for (int h = 0; h < 2; ++h) {
      const __m512 sum = _mm512_maskz_cvtepi32_ps(  // maskz: see quantize_row
          0xFFFF, _mm512_sub_epi32(acc[r][h], _mm512_loadu_si512(comp + 16 * h)));
      const __m512 out = _mm512_fmadd_ps(_mm512_mul_ps(sum, _mm512_loadu_ps(ws + 16 * h)), scale,
                                         _mm512_loadu_ps(b + 16 * h));
      _mm512_mask_storeu_ps(y + r * ldy + 16 * h, h == 0 ? m0 : m1, out);
    }
  }
}

}  // namespace

bool cpu_has_packed_fp32() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
#else
  return false;
#endif
}

bool cpu_has_packed_int8() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = cpu_has_packed_fp32() && __builtin_cpu_supports("avx512f") &&
                          __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") &&
                          __builtin_cpu_supports("avx512vnni");
  return has;
#else
  return false;
#endif
}

FrozenLinear::FrozenLinear(const torch::Tensor& weight, const torch::Tensor& bias,
                           InferencePrecision precision)
    : precision_(precision), in_(weight.size(1)), out_(weight.size(0)) {
  torch::NoGradGuard no_grad;
  if (precision == InferencePrecision::kInt8 && !cpu_has_packed_int8()) {
    int8_ = Int8Linear(weight, bias);
    return;
  }
  const auto w = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const auto b = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();
  if (precision == InferencePrecision::kInt8) {
    pack_int8(w, b);
    return;
  }
  if (!cpu_has_packed_fp32()) {
    weight_ = w;
    plain_bias_ = b;
    return;
  }
  const int64_t panels = (out_ + kPanel - 1) / kPanel;
  panels_.assign(panels * in_ * kPanel, 0.0F);
  bias_.assign(panels * kPanel, 0.0F);
  const float* wp = w.data_ptr<float>();
  for (int64_t o = 0; o < out_; ++o) {
    float* column = panels_.data() + (o / kPanel) * in_ * kPanel + o % kPanel;
    for (int64_t k = 0; k < in_; ++k) column[k * kPanel] = wp[o * in_ + k];
  }
  std::copy(b.data_ptr<float>(), b.data_ptr<float>() + out_, bias_.begin());
}

void FrozenLinear::pack_int8(const torch::Tensor& w, const torch::Tensor& b) {
  // Symmetric per output row: the row's largest magnitude maps to 127 (an all-zero row: scale 1).
  const int64_t panels = (out_ + kPanel8 - 1) / kPanel8, quads = (in_ + 3) / 4;
  panels8_.assign(panels * quads * 4 * kPanel8, 0);
  comp_.assign(panels * kPanel8, 0);
  scales_.assign(panels * kPanel8, 1.0F);
  bias_.assign(panels * kPanel8, 0.0F);
  const float* wp = w.data_ptr<float>();
  for (int64_t o = 0; o < out_; ++o) {
    const float* row = wp + o * in_;
    float top = 0;
    for (int64_t k = 0; k < in_; ++k) top = std::max(top, std::fabs(row[k]));
    const float scale = top > 0 ? top / 127.0F : 1.0F;
    int8_t* column = panels8_.data() + (o / kPanel8) * quads * 4 * kPanel8 + (o % kPanel8) * 4;
    int32_t sum = 0;
    for (int64_t k = 0; k < in_; ++k) {
      const auto q =
          static_cast<int8_t>(std::clamp(std::nearbyint(row[k] / scale), -127.0F, 127.0F));
      column[(k / 4) * 4 * kPanel8 + k % 4] = q;
      sum += q;
    }
    comp_[o] = static_cast<int32_t>(kZero8) * sum;  // what the inputs' offset of 128 adds
    scales_[o] = scale;
  }
  std::copy(b.data_ptr<float>(), b.data_ptr<float>() + out_, bias_.begin());
}

torch::Tensor FrozenLinear::operator()(const torch::Tensor& x) const {
  if (!packed()) {
    return precision_ == InferencePrecision::kInt8 ? int8_(x)
                                                   : linear_rows(x, weight_, plain_bias_);
  }
  const auto rows = input_rows(x);
  auto y = torch::empty({rows.size(0), out_}, torch::kFloat);
  packed_product(rows, y.data_ptr<float>());
  return shaped_like(y, x);
}

void FrozenLinear::operator()(const torch::Tensor& x, const torch::Tensor& y) const {
  const auto rows = input_rows(x);
  TORCH_CHECK(y.is_cpu() && y.scalar_type() == torch::kFloat && y.is_contiguous() && y.dim() == 2 &&
                  y.size(0) == rows.size(0) && y.size(1) == out_,
              "FrozenLinear: expected a contiguous float CPU result [", rows.size(0), ", ", out_,
              "], got ", y.sizes(), " ", y.scalar_type(), " on ", y.device());
  torch::NoGradGuard no_grad;
  if (packed()) {
    packed_product(rows, y.data_ptr<float>());
  } else {
    y.copy_((*this)(rows));
  }
}

void FrozenLinear::packed_product(const torch::Tensor& rows, float* y) const {
  if (panels8_.empty()) {
    packed_fp32(rows, y);
  } else {
    packed_int8(rows, y);
  }
}

torch::Tensor FrozenLinear::input_rows(const torch::Tensor& x) const {
  TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat && x.size(-1) == in_,
              "FrozenLinear: expected float CPU input [..., ", in_, "], got ", x.sizes(), " ",
              x.scalar_type(), " on ", x.device());
  return x.reshape({-1, in_}).contiguous();
}

torch::Tensor FrozenLinear::shaped_like(const torch::Tensor& y, const torch::Tensor& x) const {
  auto sizes = x.sizes().vec();
  sizes.back() = out_;
  return y.view(sizes);
}

void FrozenLinear::packed_fp32(const torch::Tensor& rows_in, float* yp) const {
  const int64_t rows = rows_in.size(0);
  const float* xp = rows_in.data_ptr<float>();
  const int64_t panels = (out_ + kPanel - 1) / kPanel;
  const int64_t block = std::max(kTile, kBlockFloats / in_ / kTile * kTile);
  blocks_and_panels(rows, block, panels, [&](int64_t r0, int64_t n, int64_t p, bool next) {
    const float* panel = panels_.data() + p * in_ * kPanel;
    const float* b = bias_.data() + p * kPanel;
    const int64_t cols = std::min(kPanel, out_ - p * kPanel);
    const auto* ahead = next ? reinterpret_cast<const char*>(panel + in_ * kPanel) : nullptr;
    panel_rows(n, ahead, in_, [&](int64_t r, auto R) {
      const int64_t at = r0 + r;
      tile<decltype(R)::value>(xp + at * in_, in_, panel, in_, b, yp + at * out_ + p * kPanel, out_,
                               cols);
    });
  });
}

void FrozenLinear::packed_int8(const torch::Tensor& rows_in, float* yp) const {
  const int64_t rows = rows_in.size(0), quads = (in_ + 3) / 4, in4 = (quads * 4 + 15) / 16 * 16;
  // Each input row in 8 bits with a scale of its own.
  std::vector<uint8_t> xq(rows * in4);
  std::vector<float> xs(rows);
  const float* xp = rows_in.data_ptr<float>();
  at::parallel_for(0, rows, 16, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      xs[r] = quantize_row(xp + r * in_, in_, in4, xq.data() + r * in4);
    }
  });
  const int64_t panels = (out_ + kPanel8 - 1) / kPanel8, panel_bytes = quads * 4 * kPanel8;
  const int64_t block = std::max(kTile, kBlockBytes / in4 / kTile * kTile);
  blocks_and_panels(rows, block, panels, [&](int64_t r0, int64_t n, int64_t p, bool next) {
    const int8_t* panel = panels8_.data() + p * panel_bytes;
    const int64_t c = p * kPanel8, cols = std::min(kPanel8, out_ - c);
    const auto* ahead = next ? reinterpret_cast<const char*>(panel + panel_bytes) : nullptr;
    panel_rows(n, ahead, panel_bytes / 64, [&](int64_t r, auto R) {
      const int64_t at = r0 + r;
      tile8<decltype(R)::value>(xq.data() + at * in4, in4, xs.data() + at, panel, quads,
                                comp_.data() + c, scales_.data() + c, bias_.data() + c,
                                yp + at * out_ + c, out_, cols);
    });
  });
}

}  // namespace tandem::model
