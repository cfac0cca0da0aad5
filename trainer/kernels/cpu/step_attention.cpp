#include "trainer/kernels/cpu/step_attention.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "trainer/kernels/cpu/frozen_linear.h"
#include "trainer/kernels/cpu/vector_math.h"
#include "trainer/kernels/fused/ops.h"

namespace tandem::kernels {
namespace {

#define TANDEM_AVX2 __attribute__((target("avx2,fma"))) inline __attribute__((always_inline))

// The lane sums of a[0..8), as the 8 lanes of one register.
TANDEM_AVX2 __m256 lane_sums(const __m256* a) {
  const __m256 h01 = _mm256_hadd_ps(a[0], a[1]), h23 = _mm256_hadd_ps(a[2], a[3]);
  const __m256 h45 = _mm256_hadd_ps(a[4], a[5]), h67 = _mm256_hadd_ps(a[6], a[7]);
  const __m256 lo = _mm256_hadd_ps(h01, h23), hi = _mm256_hadd_ps(h45, h67);
  // lo holds keys 0-3 in its low half and again (other columns) in its high half; hi 4-7.
  return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}

// s[0..8) = scale · (q · key i) for the 8 keys at k[0..8) (plus offset c0); dh a multiple of 8.
TANDEM_AVX2 void dots8(const float* q, const float* const* k, int64_t c0, int64_t dh, float scale,
                       float* s) {
  __m256 acc[8];
  for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
  for (int64_t c = 0; c < dh; c += 8) {
    const __m256 qc = _mm256_loadu_ps(q + c);
    for (int i = 0; i < 8; ++i) {
      acc[i] = _mm256_fmadd_ps(qc, _mm256_loadu_ps(k[i] + c0 + c), acc[i]);
    }
  }
  _mm256_storeu_ps(s, _mm256_mul_ps(lane_sums(acc), _mm256_set1_ps(scale)));
}

// For R rows that read the same keys: out[r][c0 + c] = scale[r] Σ_j p[r][j] v_j[c] over
// columns [c_begin, c_end) (a multiple of 8 C apart), v_j = key[j] + c0, keys in order. R x C
// accumulators: 8 of them keep both FMA units busy through the additions' latency.
template <int R, int C>
TANDEM_AVX2 void weighted_sums(const float* const* p, const float* const* key, int64_t c0,
                               int64_t c_begin, int64_t c_end, int64_t n, const float* scale,
                               float* const* out) {
  for (int64_t c = c_begin; c < c_end; c += 8 * C) {
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r) {
      for (int i = 0; i < C; ++i) acc[r][i] = _mm256_setzero_ps();
    }
    for (int64_t j = 0; j < n; ++j) {
      const float* vj = key[j] + c0 + c;
      __m256 v[C];
      for (int i = 0; i < C; ++i) v[i] = _mm256_loadu_ps(vj + 8 * i);
      for (int r = 0; r < R; ++r) {
        const __m256 w = _mm256_broadcast_ss(p[r] + j);
        for (int i = 0; i < C; ++i) acc[r][i] = _mm256_fmadd_ps(w, v[i], acc[r][i]);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 f = _mm256_set1_ps(scale[r]);
      for (int i = 0; i < C; ++i) {
        _mm256_storeu_ps(out[r] + c + 8 * i, _mm256_mul_ps(acc[r][i], f));
      }
    }
  }
}

// The positions a row attends to, as pointers to their key | value (head h's key at
// [h dh, (h + 1) dh), its value d further on), padded with copies of the first to a multiple of 8.
struct Keys {
  const float* const* at = nullptr;  // the positions not hidden by padding, in order
  int64_t n = 0;
  bool uniform = false;  // every position is padding: `at` holds them all, each weighing 1 / n
};

// R rows with the same keys, every head: scores (head h's of row r at s + (h R + r) ld), the
// softmax, and the weighted sums of the values into out[r] (row r of the result). A position's
// keys of every head are read together, then its values: the positions' memory in order, as the
// hardware's prefetchers expect it. The probabilities are left unnormalized; each output is scaled
// by its row's 1 / sum instead.
template <int R>
__attribute__((target("avx2,fma"))) void attend(const float* const* q, const Keys& keys, int64_t d,
                                                int64_t heads, float* s, int64_t ld,
                                                float* const* out) {
  const int64_t dh = d / heads;
  if (keys.uniform) {
    std::fill(s, s + keys.n, 1.0F);
  } else {
    const float scale = 1.0F / std::sqrt(static_cast<float>(dh));
    for (int64_t j = 0; j < keys.n; j += 8) {
      for (int64_t h = 0; h < heads; ++h) {
        for (int r = 0; r < R; ++r) {
          dots8(q[r] + h * dh, keys.at + j, h * dh, dh, scale, s + (h * R + r) * ld + j);
        }
      }
    }
  }
  // 8 accumulators a pass where the columns allow (R x C), then 8 columns at a time.
  constexpr int C = R == 1 ? 8 : R == 2 ? 4 : 2;
  const int64_t wide = dh / (8 * C) * (8 * C);
  for (int64_t h = 0; h < heads; ++h) {
    const float* p[R];
    float inv[R];
    float* at[R];
    for (int r = 0; r < R; ++r) {
      at[r] = out[r] + h * dh;
      if (keys.uniform) {
        p[r] = s;
        inv[r] = 1.0F / static_cast<float>(keys.n);
      } else {
        float* row = s + (h * R + r) * ld;
        p[r] = row;
        inv[r] = 1.0F / exp_in_place(row, keys.n, max_of(row, keys.n));
      }
    }
    weighted_sums<R, C>(p, keys.at, d + h * dh, 0, wide, keys.n, inv, at);
    weighted_sums<R, 1>(p, keys.at, d + h * dh, wide, dh, keys.n, inv, at);
  }
}

// Rows [0, rows) with the same keys, up to 4 at a time.
void attend_rows(const float* const* q, int64_t rows, const Keys& keys, int64_t d, int64_t heads,
                 float* s, int64_t ld, float* const* out) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) attend<4>(q + r, keys, d, heads, s, ld, out + r);
  switch (rows - r) {
    case 3:
      attend<3>(q + r, keys, d, heads, s, ld, out + r);
      break;
    case 2:
      attend<2>(q + r, keys, d, heads, s, ld, out + r);
      break;
    case 1:
      attend<1>(q + r, keys, d, heads, s, ld, out + r);
      break;
    default:
      break;
  }
}

// Self-attention's rows per block: beam search's hypotheses of one sentence are consecutive rows.
constexpr int64_t kSelfBlock = 4;

// Where step_attention's rows find their first `len` positions: row r's position j at
// kv[table[r][j], j] with a table, else at kv[r / width, j]; pad (if any) hides positions of
// group r / width.
struct Positions {
  const float* kv;
  int64_t kv_row, kv_position;  // kv's strides
  const int32_t* table;         // or null
  int64_t table_row;
  const bool* pad;  // or null
  int64_t pad_row;
  int64_t width, len;

  // Row r's keys, written into `at` (room for len rounded up to 8).
  Keys of_row(int64_t r, const float** at) const {
    const int64_t g = r / width;
    const bool* hidden = pad ? pad + g * pad_row : nullptr;
    auto position = [&](int64_t j) {
      return kv + (table ? table[r * table_row + j] : g) * kv_row + j * kv_position;
    };
    int64_t n = 0;
    for (int64_t j = 0; j < len; ++j) {
      if (!hidden || !hidden[j]) at[n++] = position(j);
    }
    const bool uniform = n == 0;
    if (uniform) {
      for (; n < len; ++n) at[n] = position(n);
    }
    std::fill(at + n, at + (n + 7) / 8 * 8, at[0]);
    return Keys{at, n, uniform};
  }
};

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
  const Positions positions{kv.data_ptr<float>(),
                            kv.stride(0),
                            kv.stride(1),
                            table.defined() ? table.data_ptr<int32_t>() : nullptr,
                            table.defined() ? table.stride(0) : 0,
                            pad.defined() ? pad.data_ptr<bool>() : nullptr,
                            pad.defined() ? pad.stride(0) : 0,
                            width,
                            len};
  auto out = torch::empty({rows, d}, q.options());
  const float* qp = q.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const int64_t padded = (len + 7) / 8 * 8;
  // Rows a block at a time: a sentence's rows (a block) read the same keys and values (its
  // encoder side, or on the CPU its shared prefix), which stay in cache between them. Without a
  // table, a sentence's rows share one list of keys and go through attend() together.
  const int64_t block = width > 1 ? width : kSelfBlock;
  at::parallel_for(0, (rows + block - 1) / block, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores(4 * heads * padded);
    std::vector<const float*> pointers(block * padded);
    std::vector<Keys> keys(block);
    std::vector<const float*> queries(block);
    std::vector<float*> outs(block);
    for (int64_t b = begin; b < end; ++b) {
      const int64_t first = b * block, count = std::min(rows, first + block) - first;
      for (int64_t i = 0; i < count; ++i) {
        const int64_t r = first + i;
        queries[i] = qp + r * q.stride(0);
        outs[i] = op + r * d;
        const bool same_sentence = !positions.table && i > 0 && (r - 1) / width == r / width;
        keys[i] = same_sentence ? keys[i - 1] : positions.of_row(r, pointers.data() + i * padded);
      }
      for (int64_t i = 0; i < count;) {
        int64_t same = 1;  // rows from i on with i's keys
        while (i + same < count && keys[i + same].at == keys[i].at) ++same;
        attend_rows(queries.data() + i, same, keys[i], d, heads, scores.data(), padded,
                    outs.data() + i);
        i += same;
      }
    }
  });
  return out;
}

torch::Tensor row_attention(const torch::Tensor& q, const torch::Tensor& kv,
                            const torch::Tensor& pad, int64_t heads) {
  const int64_t batch = q.size(0), q_len = q.size(1), d = q.size(2);
  const auto rows = q.flatten(0, 1);  // a view: a batch's rows are evenly spaced
  if (!loop_applies(rows, kv, heads)) {
    AttentionMask mask{pad, false};
    mask.per_sentence = true;
    return fused_attention(q, kv, heads, mask);
  }
  return step_attention(rows, kv, kv.size(1), q_len, pad, heads).view({batch, q_len, d});
}

}  // namespace tandem::kernels
