#include "trainer/kernels/cpu/step_attention.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "trainer/kernels/cpu/frozen_linear.h"
#include "trainer/kernels/cpu/vector_math.h"
#include "trainer/kernels/fused/ops.h"

namespace tandem::model {
namespace {

#define TANDEM_AVX2 __attribute__((target("avx2,fma"))) inline __attribute__((always_inline))

// Asks for the cache lines of x[0..n) ahead of their use.
TANDEM_AVX2 void prefetch(const float* x, int64_t n) {
  for (int64_t c = 0; c < n; c += 16)
    _mm_prefetch(reinterpret_cast<const char*>(x + c), _MM_HINT_T0);
}

// The lane sums of a[0..8), as the 8 lanes of one register.
TANDEM_AVX2 __m256 lane_sums(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);
  // lo holds keys 0-3 in its low half and again (other columns) in its high half; hi 4-7.
  return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}

// s[0..8) = q · key i for the 8 keys at k[0..8) (plus offset c0); dh a multiple of 8.
TANDEM_AVX2 void dots8(const float* q, const float* const* k, int64_t c0, int64_t dh, float* s) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t c = 0; c < dh; c += 8) {
    const __m256 qc = _mm256_loadu_ps(q + c);
    for (int i = 0; i < 8; ++i) {
      acc[i] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k[i] + c0 + c), acc[i]);
    }
  }
  _mm256_storeu_ps(s, lane_sums(acc));
}

// out[0..8 N) = Σ_j p[j] v_j[c0..c0 + 8 N), v_j = key[j] + d, over the keys with p[j] != 0, in
// key order.
template <int N>
TANDEM_AVX2 void weighted_sum(const float* p, const float* const* key, int64_t c0, int64_t len,
                              float* out) {
  __m256 acc[N];
  for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t j = 0; j < len; ++j) {
    if (p[j] == 0.0F) continue;  // padding: it adds nothing
    if (j + 8 < len) prefetch(key[j + 8] + c0, 8 * N);
    const __m256 w = _mm256_broadcast_ss(p + j);
    const float* vj = key[j] + c0;
    for (int i = 0; i < N; ++i) acc[i] = _mm256_fmadd_ps(w, _mm256_loadu_ps(vj + 8 * i), acc[i]);
  }
  for (int i = 0; i < N; ++i) _mm256_storeu_ps(out + 8 * i, acc[i]);
}

// Scores s[0..len) (scaled dot products) → probabilities; padding gets exactly 0, and all padding
// makes them uniform.
void softmax_in_place(float* s, int64_t len, const bool* pad) {
  float top = -std::numeric_limits<float>::infinity();
  int64_t hidden = 0;
  for (int64_t j = 0; j < len; ++j) {
    if (pad && pad[j]) {
      ++hidden;
      continue;
    }
    top = std::max(top, s[j]);
  }
  if (hidden == len) {
    for (int64_t j = 0; j < len; ++j) s[j] = 1.0F / static_cast<float>(len);
    return;
  }
  if (hidden > 0) {
    for (int64_t j = 0; j < len; ++j) s[j] = pad[j] ? top : s[j];  // finite until zeroed below
  }
  float sum = exp_in_place(s, len, top);
  if (hidden > 0) {
    sum = 0;
    for (int64_t j = 0; j < len; ++j) {
      if (pad[j]) s[j] = 0.0F;
      sum += s[j];
    }
  }
  const float inv = 1.0F / sum;
  for (int64_t j = 0; j < len; ++j) s[j] *= inv;
}

// One row and head (columns c0..c0 + dh of d): position j's key | value at key[j] (padded with
// copies of key[0] to a multiple of 8), the query q [d], the output out [d]; s has room for the
// padded scores.
__attribute__((target("avx2,fma"))) void attend(const float* q, const float* const* key,
                                                int64_t len, const bool* pad, int64_t d, int64_t c0,
                                                int64_t dh, float* s, float* out) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(dh));
  for (int64_t j = 0; j < len; j += 8) {
    for (int64_t i = j + 8; i < std::min(j + 16, len); ++i) prefetch(key[i] + c0, dh);
    dots8(q + c0, key + j, c0, dh, s + j);
  }
  for (int64_t j = 0; j < std::min<int64_t>(len, 8); ++j) prefetch(key[j] + d + c0, dh);
  for (int64_t j = 0; j < len; ++j) s[j] *= scale;
  softmax_in_place(s, len, pad);
  int64_t c = c0;
  for (; c + 64 <= c0 + dh; c += 64) weighted_sum<8>(s, key, d + c, len, out + c);
  for (; c < c0 + dh; c += 8) weighted_sum<1>(s, key, d + c, len, out + c);
}

// Self-attention's rows per block: beam search's hypotheses of one sentence are consecutive rows.
constexpr int64_t kSelfBlock = 4;

bool loop_applies(const torch::Tensor& q, const torch::Tensor& kv, int64_t heads) {
  return cpu_has_packed_fp32() && q.is_cpu() && kv.is_cpu() && q.scalar_type() == torch::kFloat &&
         kv.scalar_type() == torch::kFloat && q.stride(1) == 1 && kv.stride(2) == 1 &&
         (q.size(1) / heads) % 8 == 0;
}

// The same through the attention kernels of fused/ops.h, where the packed loop does not apply.
torch::Tensor step_attention_with_tensor_ops(const torch::Tensor& q, const torch::Tensor& kv,
                                             int64_t len, int64_t width,
                                             const torch::Tensor& pad_in, int64_t heads,
                                             const torch::Tensor& cache_rows) {
  const int64_t rows = q.size(0), d = q.size(1);
  auto keys = kv;
  if (cache_rows.defined()) {
    // Each row's positions gathered into a row of their own.
    const auto at = cache_rows.narrow(1, 0, len).to(kv.device(), torch::kLong) * kv.size(1) +
                    torch::arange(len, torch::TensorOptions(kv.device()).dtype(torch::kLong));
    keys = kv.reshape({-1, 2 * d}).index_select(0, at.reshape({-1})).view({rows, len, 2 * d});
  }
  if (width == 1 && !pad_in.defined()) return cached_attention(q, keys, len, heads);
  const AttentionMask mask{pad_in.defined() ? pad_in.narrow(1, 0, len) : torch::Tensor(), false};
  return fused_attention(q.reshape({-1, width, d}), keys.narrow(1, 0, len), heads, mask)
      .view({rows, d});
}

}  // namespace

torch::Tensor step_attention(const torch::Tensor& q, const torch::Tensor& kv, int64_t len,
                             int64_t width, const torch::Tensor& pad_in, int64_t heads,
                             const torch::Tensor& cache_rows) {
  const int64_t rows = q.size(0), d = q.size(1);
  TORCH_CHECK(q.dim() == 2 && kv.dim() == 3 && kv.size(2) == 2 * d && len >= 1 &&
                  len <= kv.size(1) && d % heads == 0 &&
                  (cache_rows.defined()
                       ? width == 1 && cache_rows.size(0) == rows && cache_rows.size(1) >= len
                       : rows == kv.size(0) * width),
              "step_attention: q ", q.sizes(), ", kv ", kv.sizes(), ", len ", len, ", width ",
              width, ", heads ", heads);
  if (!loop_applies(q, kv, heads)) {
    return step_attention_with_tensor_ops(q, kv, len, width, pad_in, heads, cache_rows);
  }
  const auto pad = pad_in.defined() ? pad_in.to(torch::kBool).contiguous() : torch::Tensor();
  const auto table = cache_rows.defined() ? cache_rows.to(torch::kInt).contiguous() : cache_rows;
  auto out = torch::empty({rows, d}, q.options());
  const float* qp = q.data_ptr<float>();
  const float* kvp = kv.data_ptr<float>();
  const bool* padp = pad.defined() ? pad.data_ptr<bool>() : nullptr;
  const int32_t* tp = table.defined() ? table.data_ptr<int32_t>() : nullptr;
  float* op = out.data_ptr<float>();
  const int64_t padded = (len + 7) / 8 * 8, dh = d / heads;
  // Rows a block at a time, head by head: a sentence's rows (a block) read the same keys and
  // values (its encoder side, or on the CPU its shared prefix), one head's of which stay in L1.
  const int64_t block = width > 1 ? width : kSelfBlock;
  at::parallel_for(0, (rows + block - 1) / block, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(padded);
    std::vector<const float*> keys(block * padded);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * block, last = std::min(rows, first + block);
      for (int64_t r = first; r < last; ++r) {
        const float** key = keys.data() + (r - first) * padded;
        for (int64_t j = 0; j < len; ++j) {
          const int64_t at = tp ? tp[r * table.stride(0) + j] : r / width;
          key[j] = kvp + at * kv.stride(0) + j * kv.stride(1);
        }
        std::fill(key + len, key + padded, key[0]);
      }
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t r = first; r < last; ++r) {
          const int64_t g = r / width;
          attend(qp + r * q.stride(0), keys.data() + (r - first) * padded, len,
                 padp ? padp + g * pad.stride(0) : nullptr, d, h * dh, dh, scores.data(),
                 op + r * d);
        }
      }
    }
  });
  return out;
}

}  // namespace tandem::model
