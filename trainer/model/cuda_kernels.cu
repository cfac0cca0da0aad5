// One thread block per row of logits for the token loss; a grid of (column, block of rows) for
// the column sums. Everything sums in fp32 whatever the element type.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/model/cuda_kernels.h"

namespace tandem::model::cuda {
namespace {

constexpr int kLossThreads = 256;
constexpr int kWarp = 32;
constexpr int kColumnThreads = 256;
constexpr int64_t kColumnRowsPerBlock = 64;  // fewer blocks than that make each one longer
constexpr int64_t kMaxColumnBlocks = 1024;

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

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

template <typename T>
__global__ void __launch_bounds__(kLossThreads)
    token_loss_rows_kernel(T* logits, int64_t vocab, const int64_t* targets, const float* weight,
                           float smoothing, float* lse, float* target_logit, float* mean_logit,
                           int64_t* argmax) {
  const int64_t row = blockIdx.x;
  T* x = logits + row * vocab;
  RowPartial p{-INFINITY, 0x7fffffffffffffffLL, 0.f, 0.f};
  for (int64_t j = threadIdx.x; j < vocab; j += kLossThreads) {
    const float v = load(x + j);
    p.total += v;
    if (v > p.top) {
      p.scale = rescaled(p, v) + 1.f;
      p.top = v;
      p.at = j;
    } else if (v > -INFINITY || v != v) {  // NaN joins the sum (and spoils it, as it should)
      p.scale += expf(v - p.top);
    }
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
  for (int64_t j = threadIdx.x; j < vocab; j += kLossThreads) {
    const float g = w * (expf(load(x + j) - row_lse) - uniform);
    store(x + j, j == target ? g - hit : g);
  }
}

template <typename T, bool kScaled>
__global__ void __launch_bounds__(kColumnThreads)
    column_sums_kernel(const T* a, const T* x, const float* mean, const float* rstd, int64_t rows,
                       int64_t cols, int64_t span, float* sums, float* scaled) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColumnThreads + threadIdx.x;
  if (c >= cols) return;
  const int64_t begin = static_cast<int64_t>(blockIdx.y) * span;
  const int64_t end = begin + span < rows ? begin + span : rows;
  float s = 0.f, t = 0.f;
  for (int64_t r = begin; r < end; ++r) {
    const float v = load(a + r * cols + c);
    s += v;
    if (kScaled) t += v * (load(x + r * cols + c) - mean[r]) * rstd[r];
  }
  sums[blockIdx.y * cols + c] = s;
  if (kScaled) scaled[blockIdx.y * cols + c] = t;
}

void check_launch(const char* kernel) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string("CUDA kernel ") + kernel +
                             " failed to launch: " + cudaGetErrorString(error));
  }
}

int64_t column_span(int64_t rows) {
  const int64_t blocks = column_blocks(rows);
  return (rows + blocks - 1) / blocks;
}

template <typename T>
void launch_column_sums(const void* a, const void* x, const float* mean, const float* rstd,
                        int64_t rows, int64_t cols, float* sums, float* scaled,
                        cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((cols + kColumnThreads - 1) / kColumnThreads),
                  static_cast<unsigned>(column_blocks(rows)));
  const auto* at = static_cast<const T*>(a);
  if (x) {
    column_sums_kernel<T, true><<<grid, kColumnThreads, 0, stream>>>(
        at, static_cast<const T*>(x), mean, rstd, rows, cols, column_span(rows), sums, scaled);
  } else {
    column_sums_kernel<T, false><<<grid, kColumnThreads, 0, stream>>>(
        at, nullptr, nullptr, nullptr, rows, cols, column_span(rows), sums, nullptr);
  }
  check_launch("column_sums");
}

}  // namespace

void token_loss_rows(void* logits, Element element, int64_t rows, int64_t vocab,
                     const int64_t* targets, const float* weight, float smoothing, float* lse,
                     float* target_logit, float* mean_logit, int64_t* argmax, void* stream) {
  if (rows == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  const auto grid = static_cast<unsigned>(rows);
  if (element == Element::kBFloat16) {
    token_loss_rows_kernel<<<grid, kLossThreads, 0, s>>>(static_cast<__nv_bfloat16*>(logits), vocab,
                                                         targets, weight, smoothing, lse,
                                                         target_logit, mean_logit, argmax);
  } else {
    token_loss_rows_kernel<<<grid, kLossThreads, 0, s>>>(static_cast<float*>(logits), vocab,
                                                         targets, weight, smoothing, lse,
                                                         target_logit, mean_logit, argmax);
  }
  check_launch("token_loss_rows");
}

int64_t column_blocks(int64_t rows) {
  const int64_t wanted = (rows + kColumnRowsPerBlock - 1) / kColumnRowsPerBlock;
  return std::max<int64_t>(1, std::min(wanted, kMaxColumnBlocks));
}

void column_sums(const void* a, const void* x, const float* mean, const float* rstd,
                 Element element, int64_t rows, int64_t cols, float* sums, float* scaled,
                 void* stream) {
  if (rows == 0 || cols == 0) return;
  const auto s = static_cast<cudaStream_t>(stream);
  if (element == Element::kBFloat16) {
    launch_column_sums<__nv_bfloat16>(a, x, mean, rstd, rows, cols, sums, scaled, s);
  } else {
    launch_column_sums<float>(a, x, mean, rstd, rows, cols, sums, scaled, s);
  }
}

}  // namespace tandem::model::cuda
