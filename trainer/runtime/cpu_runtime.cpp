#include "trainer/runtime/cpu_runtime.h"

#include <dlfcn.h>
#include <torch/torch.h>

#include <algorithm>
#include <climits>

#include "trainer/runtime/block_cache.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tandem::runtime {

void configure_cpu_runtime(const CpuRuntimeOptions& options) {
  torch::set_num_threads(options.threads);
  // OpenBLAS keeps its own thread pool sized from the environment; resize it when the library
  // is the BLAS LibTorch was linked against (looked up at run time: it may be absent).
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(options.threads);
  }
  tune_allocator(options.workload);
  set_onednn_cache(options.onednn_cache);
}

void set_onednn_cache(int64_t primitives) {
  // oneDNN's C API, looked up at run time like OpenBLAS's: absent when LibTorch has no oneDNN.
  using SetCapacity = int (*)(int);
  if (auto fn =
          reinterpret_cast<SetCapacity>(dlsym(RTLD_DEFAULT, "dnnl_set_primitive_cache_capacity"))) {
    fn(static_cast<int>(std::min<int64_t>(primitives, INT_MAX)));
  }
}

void tune_allocator(Workload workload) {
  if (workload == Workload::kDecoding) use_block_cache();
#if defined(__GLIBC__)
  // A fixed threshold also stops glibc's dynamic raising of it.
  if (workload == Workload::kTraining || workload == Workload::kConversion) {
    mallopt(M_MMAP_THRESHOLD, 4 << 20);
  } else {
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
  }
#else
  (void)workload;
#endif
}

}  // namespace tandem::runtime
