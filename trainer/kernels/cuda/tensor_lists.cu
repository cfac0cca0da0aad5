// Tensor lists in few launches: up to kParts tensors in each, laid end to end; every block takes
// one run of the joined elements and finds, for each of its elements, the part holding it by a
// binary search over the parts' starts in shared memory.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "trainer/kernels/cuda/tensor_lists.h"

namespace tandem::kernels::cuda {
namespace {

constexpr int kParts = 64;  // tensors a launch (the struct below is a kernel argument)
constexpr int kThreads = 256;
constexpr int kPerThread = 8;  // elements a thread, kThreads apart (coalesced)
constexpr int64_t kRun = static_cast<int64_t>(kThreads) * kPerThread;

struct Launch {
  const float* sources[kParts];
  void* targets[kParts];
  int64_t starts[kParts + 1];  // part i holds joined elements [starts[i], starts[i + 1])
  int parts;
};

enum class Pass { kToBf16, kMovingAverage };

// The part holding joined element e: the last i with starts[i] <= e.
__device__ __forceinline__ int part_of(const int64_t* starts, int parts, int64_t e) {
  int low = 0, high = parts - 1;
  while (low < high) {
    const int mid = (low + high + 1) / 2;
    if (starts[mid] <= e) {
      low = mid;
    } else {
      high = mid - 1;
    }
  }
  return low;
}

template <Pass kPass>
__global__ void __launch_bounds__(kThreads) list_kernel(Launch launch, const float* weight) {
  __shared__ int64_t starts[kParts + 1];
  for (int i = threadIdx.x; i <= launch.parts; i += kThreads) starts[i] = launch.starts[i];
  __syncthreads();
  const int64_t total = starts[launch.parts];
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kRun + threadIdx.x;
  float w = 0.f;
  if constexpr (kPass == Pass::kMovingAverage) w = *weight;
  if (first >= total) return;
  int p = part_of(starts, launch.parts, first);  // then forward: a thread's elements ascend
#pragma unroll
  for (int k = 0; k < kPerThread; ++k) {
    const int64_t e = first + static_cast<int64_t>(k) * kThreads;
    if (e >= total) break;
    while (e >= starts[p + 1]) ++p;
    const int64_t j = e - starts[p];
    const float value = launch.sources[p][j];
    if constexpr (kPass == Pass::kToBf16) {
      static_cast<__nv_bfloat16*>(launch.targets[p])[j] = __float2bfloat16_rn(value);
    } else {
      float* average = static_cast<float*>(launch.targets[p]) + j;
      *average = __fadd_rn(*average, __fmul_rn(__fsub_rn(value, *average), w));
    }
  }
}

template <Pass kPass>
void run_list(const PartList& list, const float* weight, void* stream, const char* name) {
  Launch launch{};
  const auto s = static_cast<cudaStream_t>(stream);
  for (int first = 0; first < list.parts; first += kParts) {
    launch.parts = std::min(kParts, list.parts - first);
    launch.starts[0] = 0;
    for (int i = 0; i < launch.parts; ++i) {
      launch.sources[i] = list.sources[first + i];
      launch.targets[i] = list.targets[first + i];
      launch.starts[i + 1] = launch.starts[i] + list.counts[first + i];
    }
    const int64_t total = launch.starts[launch.parts];
    if (total == 0) continue;
    const int64_t blocks = (total + kRun - 1) / kRun;
    list_kernel<kPass><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(launch, weight);
    const cudaError_t error = cudaGetLastError();
    if (error != cudaSuccess) {
      throw std::runtime_error(std::string("CUDA kernel ") + name +
                               " failed to launch: " + cudaGetErrorString(error));
    }
  }
}

}  // namespace

void to_bf16(const PartList& list, void* stream) {
  run_list<Pass::kToBf16>(list, nullptr, stream, "to_bf16");
}

void moving_average(const PartList& list, const float* weight, void* stream) {
  run_list<Pass::kMovingAverage>(list, weight, stream, "moving_average");
}

}  // namespace tandem::kernels::cuda
