#include "trainer/model/frozen_linear.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cstring>

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

// Rows [0, rows) of one panel, a tile at a time. While they run, the cache lines of `next` (the
// panel after it, [in, 16], or null) are fetched ahead, a share per tile: a panel's first tile
// would otherwise wait on memory at every step.
TANDEM_AVX2 void panel_rows(const float* x, int64_t rows, const float* p, int64_t in,
                            const float* b, float* y, int64_t out, int64_t cols,
                            const float* next) {
  const int64_t lines = in, tiles = (rows + kTile - 1) / kTile;  // a panel row is one 64-byte line
  const int64_t share = (lines + tiles - 1) / tiles;
  int64_t fetched = 0;
  auto fetch_share = [&] {
    if (!next) return;
    for (const int64_t end = std::min(lines, fetched + share); fetched < end; ++fetched) {
      _mm_prefetch(reinterpret_cast<const char*>(next + fetched * kPanel), _MM_HINT_T1);
    }
  };
  int64_t r = 0;
  for (; r + kTile <= rows; r += kTile) {
    fetch_share();
    tile<kTile>(x + r * in, in, p, in, b, y + r * out, out, cols);
  }
  fetch_share();
  const float* xr = x + r * in;
  float* yr = y + r * out;
  switch (rows - r) {
    case 5:
      tile<5>(xr, in, p, in, b, yr, out, cols);
      break;
    case 4:
      tile<4>(xr, in, p, in, b, yr, out, cols);
      break;
    case 3:
      tile<3>(xr, in, p, in, b, yr, out, cols);
      break;
    case 2:
      tile<2>(xr, in, p, in, b, yr, out, cols);
      break;
    case 1:
      tile<1>(xr, in, p, in, b, yr, out, cols);
      break;
    default:
      break;
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

FrozenLinear::FrozenLinear(const torch::Tensor& weight, const torch::Tensor& bias,
                           InferencePrecision precision)
    : precision_(precision), in_(weight.size(1)), out_(weight.size(0)) {
  torch::NoGradGuard no_grad;
  if (precision == InferencePrecision::kInt8) {
    int8_ = Int8Linear(weight, bias);
    return;
  }
  const auto w = weight.detach().to(torch::kCPU, torch::kFloat).contiguous();
  const auto b = bias.detach().to(torch::kCPU, torch::kFloat).contiguous();
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

torch::Tensor FrozenLinear::operator()(const torch::Tensor& x) const {
  if (precision_ == InferencePrecision::kInt8) return int8_(x);
  if (panels_.empty()) return linear_rows(x, weight_, plain_bias_);
  return packed_fp32(x);
}

torch::Tensor FrozenLinear::packed_fp32(const torch::Tensor& x) const {
  TORCH_CHECK(x.is_cpu() && x.scalar_type() == torch::kFloat && x.size(-1) == in_,
              "FrozenLinear: expected float CPU input [..., ", in_, "], got ", x.sizes(), " ",
              x.scalar_type(), " on ", x.device());
  auto sizes = x.sizes().vec();
  const auto rows_in = x.reshape({-1, in_}).contiguous();
  const int64_t rows = rows_in.size(0);
  sizes.back() = out_;
  auto y = torch::empty({rows, out_}, torch::kFloat);
  const float* xp = rows_in.data_ptr<float>();
  float* yp = y.data_ptr<float>();
  const int64_t panels = (out_ + kPanel - 1) / kPanel;
  const int64_t block = std::max(kTile, kBlockFloats / in_ / kTile * kTile);
  for (int64_t r = 0; r < rows; r += block) {
    const int64_t n = std::min(block, rows - r);
    at::parallel_for(0, panels, 1, [&](int64_t begin, int64_t end) {
      for (int64_t p = begin; p < end; ++p) {
        const float* panel = panels_.data() + p * in_ * kPanel;
        panel_rows(xp + r * in_, n, panel, in_, bias_.data() + p * kPanel,
                   yp + r * out_ + p * kPanel, out_, std::min(kPanel, out_ - p * kPanel),
                   p + 1 < end ? panel + in_ * kPanel : nullptr);
      }
    });
  }
  return y.view(sizes);
}

}  // namespace tandem::model
