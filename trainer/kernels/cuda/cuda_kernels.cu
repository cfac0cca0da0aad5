// One thread block per row of logits for the token loss; a grid of (stripe of columns, block of
// rows) for the column sums, in one launch; one warp per row for the residual add (after dropout)
// with LayerNorm, and for its backward. Everything sums in fp32 whatever the element type.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "trainer/kernels/cuda/cuda_kernels.h"
#include "trainer/kernels/cuda/philox.h"

namespace tandem::kernels::cuda {
namespace {

constexpr int kLossThreads = 256;
constexpr int kWarp = 32;
constexpr int kColumnLanes = 32;  // threads side by side along a row (one warp)
constexpr int kRowLanes = 16;     // threads down a block's rows
constexpr int kColumnThreads = kColumnLanes * kRowLanes;
constexpr int64_t kColumnRowsPerBlock = 64;  // fewer blocks than that make each one longer
constexpr int64_t kMaxColumnBlocks = 64;     // what the last block of a stripe adds up
constexpr int kPlainSums = 0;                // column sums of a
constexpr int kScaledSums = 1;               // and of a · (x − mean) · rstd (LayerNorm's weight)
constexpr int kReluSums = 2;                 // of a where x > 0, masked a written (relu backward)
constexpr int kNormRowsPerBlock = 4;  // add_layer_norm: one warp a row
constexpr int kNormMaxRuns = 8;       // 8-element runs a lane holds: rows of up to 2,048

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// What a thread (then a warp, then the block) has seen of a row: the largest logit and its
// first index, Σ exp(x − top) and Σ x.
struct RowPartial {
  float top;
  long long at;
  float scale;
  float total;
};

__device__ __forceinline__ float rescaled(const RowPartial& p, float top) {
  return p.top == -INFINITY ? 0.f : p.scale * expf(p.top - top);
}

__device__ __forceinline__ RowPartial merge(const RowPartial& a, const RowPartial& b) {
  const bool take_b = b.top > a.top || (b.top == a.top && b.at < a.at);
  const float top = fmaxf(a.top, b.top);
  return RowPartial{top, take_b ? b.at : a.at, rescaled(a, top) + rescaled(b, top),
                    a.total + b.total};
}

__device__ __forceinline__ RowPartial warp_merge(RowPartial p) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    RowPartial other;
    other.top = __shfl_xor_sync(0xffffffffu, p.top, offset);
    other.at = __shfl_xor_sync(0xffffffffu, p.at, offset);
    other.scale = __shfl_xor_sync(0xffffffffu, p.scale, offset);
    other.total = __shfl_xor_sync(0xffffffffu, p.total, offset);
    p = merge(p, other);
  }
  return p;
}

// The whole block's RowPartial, in every thread.
__device__ RowPartial block_merge(RowPartial p) {
  __shared__ RowPartial warps[kLossThreads / kWarp];
  __shared__ RowPartial whole;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  p = warp_merge(p);
  if (lane == 0) warps[warp] = p;
  __syncthreads();
  if (warp == 0) {
    RowPartial q = lane < kLossThreads / kWarp
                       ? warps[lane]
                       : RowPartial{-INFINITY, 0x7fffffffffffffffLL, 0.f, 0.f};
    q = warp_merge(q);
    if (lane == 0) whole = q;
  }
  __syncthreads();
  return whole;
}

// V consecutive elements from p as floats: one 16-byte load where V > 1 (p then 16-byte aligned).
template <int V>
__device__ __forceinline__ void load_run(const float* p, float* out) {
  if constexpr (V == 4) {
    const float4 f = *reinterpret_cast<const float4*>(p);
    out[0] = f.x, out[1] = f.y, out[2] = f.z, out[3] = f.w;
  } else {
    static_assert(V == 1, "fp32 runs are 1 or 4 elements");
    out[0] = *p;
  }
}

template <int V>
__device__ __forceinline__ void load_run(const __nv_bfloat16* p, float* out) {
  if constexpr (V == 8) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = __bfloat1622float2(pairs[i]);
      out[2 * i] = f.x, out[2 * i + 1] = f.y;
    }
  } else {
    static_assert(V == 1, "bf16 runs are 1 or 8 elements");
    out[0] = __bfloat162float(*p);
  }
}

// V floats to V consecutive elements at p (16-byte aligned where V > 1); values that came from
// elements of the same type store back unchanged.
template <int V>
__device__ __forceinline__ void store_run(float* p, const float* v) {
  if constexpr (V == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    static_assert(V == 1, "fp32 runs are 1 or 4 elements");
    *p = v[0];
  }
}

template <int V>
__device__ __forceinline__ void store_run(__nv_bfloat16* p, const float* v) {
  if constexpr (V == 8) {
    uint4 raw;
    auto* pairs = reinterpret_cast<__nv_bfloat162*>(&raw);
#pragma unroll
    for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
    static_assert(V == 1, "bf16 runs are 1 or 8 elements");
    *p = __float2bfloat16_rn(v[0]);
  }
}

// Element j of a row into a thread's running partial (each thread's elements in ascending order).
__device__ __forceinline__ void take(RowPartial& p, float v, int64_t j) {
  p.total += v;
  if (v > p.top) {
    p.scale = rescaled(p, v) + 1.f;
    p.top = v;
    p.at = j;
  } else if (v > -INFINITY || v != v) {  // NaN joins the sum (and spoils it, as it should)
    p.scale += expf(v - p.top);
  }
}

// One block a row, read in runs of V elements (one 16-byte load each where V > 1).
template <typename T, int V>
__global__ void __launch_bounds__(kLossThreads)
    token_loss_rows_kernel(T* logits, int64_t vocab, const int64_t* targets, const float* weight,
                           float smoothing, float* lse, float* target_logit, float* mean_logit,
                           int64_t* argmax) {
  const int64_t row = blockIdx.x, runs = vocab / V;
  T* x = logits + row * vocab;
  RowPartial p{-INFINITY, 0x7fffffffffffffffLL, 0.f, 0.f};
  for (int64_t r = threadIdx.x; r < runs; r += kLossThreads) {
    float v[V];
    load_run<V>(x + r * V, v);
#pragma unroll
    for (int i = 0; i < V; ++i) take(p, v[i], r * V + i);
  }
  const RowPartial whole = block_merge(p);
  const float row_lse = whole.top + logf(whole.scale);
  const int64_t target = targets[row];
  if (threadIdx.x == 0) {
    if (lse) lse[row] = row_lse;
    if (mean_logit) mean_logit[row] = whole.total / static_cast<float>(vocab);
    if (argmax) argmax[row] = whole.at;
    if (target_logit) target_logit[row] = target >= 0 && target < vocab ? load(x + target) : NAN;
  }
  if (!weight) return;
  __syncthreads();  // the target's logit is read before it is overwritten
  const float w = weight[row];
  const float uniform = smoothing / static_cast<float>(vocab), hit = w * (1.f - smoothing);
  for (int64_t r = threadIdx.x; r < runs; r += kLossThreads) {
    float v[V];
    load_run<V>(x + r * V, v);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const float g = w * (expf(v[i] - row_lse) - uniform);
      v[i] = r * V + i == target ? g - hit : g;
    }
    store_run<V>(x + r * V, v);
  }
}

// R adjacent partial sums, as written by other blocks of the same launch (read past L1).
template <int R>
__device__ __forceinline__ void load_partial(const float* p, float* out) {
  if constexpr (R == 4) {
    const float4 f = __ldcg(reinterpret_cast<const float4*>(p));
    out[0] = f.x, out[1] = f.y, out[2] = f.z, out[3] = f.w;
  } else {
    out[0] = __ldcg(p);
  }
}

// Σ of column j of `lanes` over its first `count` rows, in row order.
template <int kWidth>
__device__ __forceinline__ float lanes_total(const float (*lanes)[kWidth], int count, int j) {
  float total = 0.f;
  for (int l = 0; l < count; ++l) total += lanes[l][j];
  return total;
}

// Block (stripe, b)'s share: rows [b·span, (b+1)·span) of the stripe's kColumnLanes·V columns,
// each thread V adjacent columns of every kRowLanes-th row, then the row lanes in order, into
// work[o][b] (and relu's masked gradient written on the way).
template <typename T, int V, int kMode, int kOut>
__device__ void block_partial_sums(const T* a, const T* x, const float* mean, const float* rstd,
                                   int64_t rows, int64_t cols, int64_t span, float* work, T* masked,
                                   float (*lanes)[kRowLanes][kColumnLanes * V]) {
  constexpr int kWidth = kColumnLanes * V;
  constexpr bool kScaled = kMode == kScaledSums;
  const int tid = threadIdx.y * kColumnLanes + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWidth;
  const int64_t c = first + threadIdx.x * V;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * span;
  const int64_t end = begin + span < rows ? begin + span : rows;
  float s[V], t[V];
#pragma unroll
  for (int i = 0; i < V; ++i) s[i] = 0.f, t[i] = 0.f;
  if (c < cols) {
#pragma unroll 4
    for (int64_t r = begin + threadIdx.y; r < end; r += kRowLanes) {
      float v[V];
      load_run<V>(a + r * cols + c, v);
      if constexpr (kMode == kReluSums) {
        float u[V];
        load_run<V>(x + r * cols + c, u);
#pragma unroll
        for (int i = 0; i < V; ++i) v[i] = u[i] > 0.f ? v[i] : 0.f;
        store_run<V>(masked + r * cols + c, v);
      }
      if constexpr (kScaled) {
        float u[V];
        load_run<V>(x + r * cols + c, u);
        const float m = mean[r], k = rstd[r];
#pragma unroll
        for (int i = 0; i < V; ++i) t[i] += v[i] * (u[i] - m) * k;
      }
#pragma unroll
      for (int i = 0; i < V; ++i) s[i] += v[i];
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) {
    lanes[0][threadIdx.y][threadIdx.x * V + i] = s[i];
    if constexpr (kScaled) lanes[kOut - 1][threadIdx.y][threadIdx.x * V + i] = t[i];
  }
  __syncthreads();
  const int64_t blocks = gridDim.y;
  for (int j = tid; j < kWidth && first + j < cols; j += kColumnThreads) {
    for (int o = 0; o < kOut; ++o) {
      work[(o * blocks + blockIdx.y) * cols + first + j] =
          lanes_total<kWidth>(lanes[o], kRowLanes, j);
    }
  }
}

// The stripe's totals, by its last block: groups of R adjacent columns (16-byte loads where rows
// are 16-byte runs), each summed over the blocks' partial sums by kColumnThreads / groups threads
// (block b to lane b mod lanes), then the lanes in order, through `lanes` (kRowLanes rows).
template <int V, int kOut>
__device__ void stripe_totals(const float* work, int64_t cols, float (*lanes)[kColumnLanes * V],
                              float* sums, float* scaled) {
  constexpr int kWidth = kColumnLanes * V;
  constexpr int R = V > 1 ? 4 : 1;
  constexpr int kGroups = kWidth / R;
  constexpr int kLanes = kColumnThreads / kGroups;
  static_assert(kLanes <= kRowLanes, "the lanes' sums fit in lanes");
  const int tid = threadIdx.y * kColumnLanes + threadIdx.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kWidth;
  const int64_t blocks = gridDim.y;
  const int group = tid % kGroups, lane = tid / kGroups;
  const int64_t col = first + group * R;
  for (int o = 0; o < kOut; ++o) {
    float acc[R];
#pragma unroll
    for (int i = 0; i < R; ++i) acc[i] = 0.f;
    if (col < cols) {
      const float* column = work + o * blocks * cols + col;
#pragma unroll 4
      for (int64_t b = lane; b < blocks; b += kLanes) {
        float part[R];
        load_partial<R>(column + b * cols, part);
#pragma unroll
        for (int i = 0; i < R; ++i) acc[i] += part[i];
      }
    }
    __syncthreads();  // the previous output's reads of lanes are done
#pragma unroll
    for (int i = 0; i < R; ++i) lanes[lane][group * R + i] = acc[i];
    __syncthreads();
    for (int j = tid; j < kWidth && first + j < cols; j += kColumnThreads) {
      (o == 0 ? sums : scaled)[first + j] = lanes_total<kWidth>(lanes, kLanes, j);
    }
  }
}

// Column sums of a stripe of columns over blocks of rows: every block writes its partial sums to
// work; the last block of a stripe to arrive adds them up in an order fixed by the grid, so the
// result is the same whichever block finishes last, and sets the stripe's counter back to zero.
template <typename T, int V, int kMode>
__global__ void __launch_bounds__(kColumnThreads)
    column_sums_kernel(const T* a, const T* x, const float* mean, const float* rstd, int64_t rows,
                       int64_t cols, int64_t span, float* work, unsigned* arrivals, float* sums,
                       float* scaled, T* masked) {
  constexpr int kOut = kMode == kScaledSums ? 2 : 1;
  __shared__ float lanes[kOut][kRowLanes][kColumnLanes * V];
  __shared__ bool last;
  block_partial_sums<T, V, kMode, kOut>(a, x, mean, rstd, rows, cols, span, work, masked, lanes);
  __threadfence();  // this block's partial sums are visible before its arrival is counted
  __syncthreads();
  if (threadIdx.x == 0 && threadIdx.y == 0) {
    last = atomicAdd(arrivals + blockIdx.x, 1u) == gridDim.y - 1;
  }
  __syncthreads();
  if (!last) return;
  stripe_totals<V, kOut>(work, cols, lanes[0], sums, scaled);
  // Every block of the stripe has arrived: its counter goes back to zero for the next launch.
  if (threadIdx.x == 0 && threadIdx.y == 0) arrivals[blockIdx.x] = 0;
}

void check_launch(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA kernel ") + kernel +
                             " failed to launch: " + cudaGetErrorString(error));
  }
}

bool aligned16(const void* p) { return p == nullptr || reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// What one column_sums_kernel launch reads and writes (x: LayerNorm's input or relu's output).
struct ColumnJob {
  const void* a;
  const void* x;
  const float* mean;
  const float* rstd;
  void* masked;
  int64_t rows, cols;
  float* sums;
  float* scaled;
  float* work;
  unsigned* arrivals;
};

template <typename T, int V, int kMode>
void launch_column_sums(const ColumnJob& job, cudaStream_t stream) {
  const int64_t blocks = column_blocks(job.rows);
  const dim3 grid(static_cast<unsigned>((job.cols + kColumnLanes * V - 1) / (kColumnLanes * V)),
                  static_cast<unsigned>(blocks));
  const dim3 threads(kColumnLanes, kRowLanes);
  const int64_t span = (job.rows + blocks - 1) / blocks;
  column_sums_kernel<T, V, kMode><<<grid, threads, 0, stream>>>(
      static_cast<const T*>(job.a), static_cast<const T*>(job.x), job.mean, job.rstd, job.rows,
      job.cols, span, job.work, job.arrivals, job.sums, job.scaled, static_cast<T*>(job.masked));
  check_launch("column_sums");
}

// 16-byte runs where every row starts on a run (cols a multiple of V) and the data is aligned.
template <typename T, int V, int kMode>
void dispatch_column_sums(const ColumnJob& job, cudaStream_t stream) {
  if (job.cols % V == 0 && aligned16(job.a) && aligned16(job.x) && aligned16(job.masked)) {
    launch_column_sums<T, V, kMode>(job, stream);
  } else {
    launch_column_sums<T, 1, kMode>(job, stream);
  }
}

template <int kMode>
void column_sums_of(Element element, const ColumnJob& job, void* stream) {
  if (job.cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (job.rows == 0) {
    cudaMemsetAsync(job.sums, 0, job.cols * sizeof(float), s);
    if (job.scaled) cudaMemsetAsync(job.scaled, 0, job.cols * sizeof(float), s);
    check_launch("column_sums (no rows)");
  } else if (element == Element::kBFloat16) {
    dispatch_column_sums<__nv_bfloat16, 8, kMode>(job, s);
  } else {
    dispatch_column_sums<float, 4, kMode>(job, s);
  }
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  }
  return v;
}

__device__ __forceinline__ float bf16_rounded(float v) {
  return __bfloat162float(__float2bfloat16_rn(v));
}

// Eight values rounded to bf16 in one 16-byte store.
__device__ __forceinline__ void store_run8(__nv_bfloat16* p, const float* v) {
  uint4 packed;
  auto* pairs = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
  for (int i = 0; i < 4; ++i) pairs[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = packed;
}

// Run `index` of 8 elements through dropout: scaled where kept, 0 where dropped.
__device__ __forceinline__ void drop_run(const Dropout& dropout, int64_t index, float* v) {
  if (dropout.threshold == 0) return;
  const philox::Block bits = philox::draw(dropout.seed, dropout.offset, index);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[i] = philox::kept(bits, i, dropout.threshold) ? v[i] * dropout.scale : 0.f;
  }
}

// One warp a row: z = residual + dropout(x) rounded to bf16 (a bf16 add), then LayerNorm of z in
// fp32 with the weight and bias rounded to bf16 (LibTorch's bf16 layer_norm with weights cast to
// bf16). Lane l holds the row's 8-element runs l, l + 32, ... in registers; mean and variance in
// two passes over them.
template <int kRuns>
__global__ void __launch_bounds__(kWarp * kNormRowsPerBlock)
    add_layer_norm_kernel(const __nv_bfloat16* residual, const __nv_bfloat16* x,
                          const float* weight, const float* bias, int64_t rows, int64_t cols,
                          float eps, Dropout dropout, __nv_bfloat16* sum, __nv_bfloat16* y,
                          float* mean, float* rstd) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;  // the whole warp: its shuffles below see every lane
  const int64_t runs = cols / 8;
  const int64_t base = row * cols;
  float z[kRuns][8];
  float total = 0.f;
#pragma unroll
  for (int k = 0; k < kRuns; ++k) {
    const int64_t run = lane + static_cast<int64_t>(k) * kWarp;
    if (run >= runs) break;
    float a[8], b[8];
    load_run<8>(residual + base + run * 8, a);
    load_run<8>(x + base + run * 8, b);
    drop_run(dropout, row * runs + run, b);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      z[k][i] = bf16_rounded(a[i] + b[i]);
      total += z[k][i];
    }
    store_run8(sum + base + run * 8, z[k]);
  }
  const float m = warp_sum(total) / static_cast<float>(cols);
  float squares = 0.f;
#pragma unroll
  for (int k = 0; k < kRuns; ++k) {
    if (lane + static_cast<int64_t>(k) * kWarp >= runs) break;
#pragma unroll
    for (int i = 0; i < 8; ++i) squares += (z[k][i] - m) * (z[k][i] - m);
  }
  const float rs = rsqrtf(warp_sum(squares) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int k = 0; k < kRuns; ++k) {
    const int64_t run = lane + static_cast<int64_t>(k) * kWarp;
    if (run >= runs) break;
    float out[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t c = run * 8 + i;
      out[i] = (z[k][i] - m) * rs * bf16_rounded(weight[c]) + bf16_rounded(bias[c]);
    }
    store_run8(y + base + run * 8, out);
  }
  if (lane == 0) mean[row] = m, rstd[row] = rs;
}

// Its backward, one warp a row: with ẑ = (z − mean) rstd and g = dy · weight (rounded to bf16 as
// in the forward pass), dz = rstd (g − mean(g) − ẑ mean(g ẑ)); dx is dz through the forward's
// dropout mask, drawn again.
template <int kRuns>
__global__ void __launch_bounds__(kWarp * kNormRowsPerBlock)
    add_layer_norm_backward_kernel(const __nv_bfloat16* dy, const __nv_bfloat16* sum,
                                   const float* mean, const float* rstd, const float* weight,
                                   int64_t rows, int64_t cols, Dropout dropout, __nv_bfloat16* dsum,
                                   __nv_bfloat16* dx) {
  const int lane = threadIdx.x % kWarp;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;  // the whole warp, as in the forward kernel
  const int64_t runs = cols / 8;
  const int64_t base = row * cols;
  const float m = mean[row], rs = rstd[row];
  float g[kRuns][8], z_hat[kRuns][8];
  float g_total = 0.f, gz_total = 0.f;
#pragma unroll
  for (int k = 0; k < kRuns; ++k) {
    const int64_t run = lane + static_cast<int64_t>(k) * kWarp;
    if (run >= runs) break;
    float d[8], z[8];
    load_run<8>(dy + base + run * 8, d);
    load_run<8>(sum + base + run * 8, z);
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      z_hat[k][i] = (z[i] - m) * rs;
      g[k][i] = d[i] * bf16_rounded(weight[run * 8 + i]);
      g_total += g[k][i];
      gz_total += g[k][i] * z_hat[k][i];
    }
  }
  const float g_mean = warp_sum(g_total) / static_cast<float>(cols);
  const float gz_mean = warp_sum(gz_total) / static_cast<float>(cols);
#pragma unroll
  for (int k = 0; k < kRuns; ++k) {
    const int64_t run = lane + static_cast<int64_t>(k) * kWarp;
    if (run >= runs) break;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = rs * (g[k][i] - g_mean - z_hat[k][i] * gz_mean);
    store_run8(dsum + base + run * 8, v);
    if (dx) {
      drop_run(dropout, row * runs + run, v);
      store_run8(dx + base + run * 8, v);
    }
  }
}

// launch(std::integral_constant<int, kRuns>()) with the fewest 8-element runs per lane that hold
// rows `cols` wide, and the grid of warps for `rows`.
template <typename Launch>
void launch_norm_rows(int64_t rows, int64_t cols, Launch&& launch) {
  const auto grid = static_cast<unsigned>((rows + kNormRowsPerBlock - 1) / kNormRowsPerBlock);
  const int64_t runs_per_lane = (cols / 8 + kWarp - 1) / kWarp;
  if (runs_per_lane <= 1) {
    launch(std::integral_constant<int, 1>(), grid);
  } else if (runs_per_lane <= 2) {
    launch(std::integral_constant<int, 2>(), grid);
  } else if (runs_per_lane <= 4) {
    launch(std::integral_constant<int, 4>(), grid);
  } else {
    launch(std::integral_constant<int, kNormMaxRuns>(), grid);
  }
}

using Bf16 = __nv_bfloat16;

}  // namespace

void token_loss_rows(void* logits, Element element, int64_t rows, int64_t vocab,
                     const int64_t* targets, const float* weight, float smoothing, float* lse,
                     float* target_logit, float* mean_logit, int64_t* argmax, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(rows);
  // 16-byte runs where every row starts on one (vocab a multiple of the run) and logits is aligned.
  const auto launch = [&](auto* x, auto run) {
    constexpr int V = decltype(run)::value;
    using T = std::remove_pointer_t<decltype(x)>;
    token_loss_rows_kernel<T, V><<<grid, kLossThreads, 0, s>>>(
        x, vocab, targets, weight, smoothing, lse, target_logit, mean_logit, argmax);
  };
  if (element == Element::kBFloat16) {
    auto* x = static_cast<__nv_bfloat16*>(logits);
    if (vocab % 8 == 0 && aligned16(logits)) {
      launch(x, std::integral_constant<int, 8>());
    } else {
      launch(x, std::integral_constant<int, 1>());
    }
  } else {
    auto* x = static_cast<float*>(logits);
    if (vocab % 4 == 0 && aligned16(logits)) {
      launch(x, std::integral_constant<int, 4>());
    } else {
      launch(x, std::integral_constant<int, 1>());
    }
  }
  check_launch("token_loss_rows");
}

int64_t column_blocks(int64_t rows) {
  const int64_t wanted = (rows + kColumnRowsPerBlock - 1) / kColumnRowsPerBlock;
  return std::max<int64_t>(1, std::min(wanted, kMaxColumnBlocks));
}

int64_t column_stripes(int64_t cols) { return (cols + kColumnLanes - 1) / kColumnLanes; }

void column_sums(const void* a, const void* x, const float* mean, const float* rstd,
                 Element element, int64_t rows, int64_t cols, float* sums, float* scaled,
                 float* work, unsigned* arrivals, void* stream) {
  const ColumnJob job{a, x, mean, rstd, nullptr, rows, cols, sums, scaled, work, arrivals};
  if (x) {
    column_sums_of<kScaledSums>(element, job, stream);
  } else {
    column_sums_of<kPlainSums>(element, job, stream);
  }
}

void relu_backward_column_sums(const void* g, const void* y, Element element, int64_t rows,
                               int64_t cols, void* masked, float* sums, float* work,
                               unsigned* arrivals, void* stream) {
  column_sums_of<kReluSums>(
      element, ColumnJob{g, y, nullptr, nullptr, masked, rows, cols, sums, nullptr, work, arrivals},
      stream);
}

bool add_layer_norm_fits(int64_t cols) {
  return cols > 0 && cols % 8 == 0 && cols <= 8 * kWarp * kNormMaxRuns;
}

void add_layer_norm(const void* residual, const void* x, const float* weight, const float* bias,
                    int64_t rows, int64_t cols, float eps, const Dropout& dropout, void* sum,
                    void* y, float* mean, float* rstd, void* stream) {
  if (rows == 0) return;
  launch_norm_rows(rows, cols, [&](auto runs, unsigned grid) {
    add_layer_norm_kernel<decltype(runs)::value>
        <<<grid, kWarp * kNormRowsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const Bf16*>(residual), static_cast<const Bf16*>(x), weight, bias, rows,
            cols, eps, dropout, static_cast<Bf16*>(sum), static_cast<Bf16*>(y), mean, rstd);
  });
  check_launch("add_layer_norm");
}

void add_layer_norm_backward(const void* dy, const void* sum, const float* mean, const float* rstd,
                             const float* weight, int64_t rows, int64_t cols,
                             const Dropout& dropout, void* dsum, void* dx, void* stream) {
  if (rows == 0) return;
  launch_norm_rows(rows, cols, [&](auto runs, unsigned grid) {
    add_layer_norm_backward_kernel<decltype(runs)::value>
        <<<grid, kWarp * kNormRowsPerBlock, 0, static_cast<cudaStream_t>(stream)>>>(
            static_cast<const Bf16*>(dy), static_cast<const Bf16*>(sum), mean, rstd, weight, rows,
            cols, dropout, static_cast<Bf16*>(dsum), static_cast<Bf16*>(dx));
  });
  check_launch("add_layer_norm_backward");
}

}  // namespace tandem::kernels::cuda
