#include "trainer/train/threads.h"

#include <dlfcn.h>
#include <torch/torch.h>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace tandem::train {

void set_compute_threads(int threads) {
  torch::set_num_threads(threads);
  // OpenBLAS keeps its own thread pool sized from the environment; resize it when the library
  // is the BLAS LibTorch was linked against (looked up at run time: it may be absent).
  using SetThreads = void (*)(int);
  if (auto fn = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    fn(threads);
  }
  tune_allocator();
  limit_onednn_cache();
}

void limit_onednn_cache() {
  // oneDNN's C API, looked up at run time like OpenBLAS's: absent when LibTorch has no oneDNN.
  using SetCapacity = int (*)(int);
  if (auto fn = reinterpret_cast<SetCapacity>(
          dlsym(RTLD_DEFAULT, "dnnl_set_primitive_cache_capacity"))) {
    fn(kOneDnnCachedPrimitives);
  }
}

void tune_allocator() {
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 4 << 20;
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);  // a fixed value also stops the dynamic raising
#endif
}

}  // namespace tandem::train
