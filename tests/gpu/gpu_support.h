// What the GPU suites (CTest label gpu) share: skipping where no GPU (or none of Tandem's own
// CUDA kernels) is there, saying why; the GPU; this process as a world of one; relative errors.
#pragma once

#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include "trainer/kernels/cuda/gpu_ops.h"
#include "trainer/parallel/process_group.h"

#define SKIP_WITHOUT_GPU()                                                     \
  if (!torch::cuda::is_available()) {                                          \
    GTEST_SKIP() << "no GPU visible to LibTorch (or a LibTorch without CUDA)"; \
  }

#define SKIP_WITHOUT_OWN_KERNELS()                                                        \
  SKIP_WITHOUT_GPU();                                                                     \
  if (!tandem::kernels::own_kernels_for(torch::zeros({1}, tandem::test::kGpu))) {         \
    GTEST_SKIP() << "this build has no CUDA kernels of its own (or TANDEM_KERNELS=aten)"; \
  }

namespace tandem::test {

inline const torch::Device kGpu(torch::kCUDA, 0);

// This process as a world of one (MPI initialised once, finalised at exit).
inline parallel::ProcessGroup& world() {
  static parallel::ProcessGroup group(nullptr, nullptr);
  return group;
}

// ‖a − b‖ / ‖b‖ over all elements, in double on the CPU.
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().to(torch::kCPU, torch::kDouble);
  const auto y = b.detach().to(torch::kCPU, torch::kDouble);
  return (x - y).norm().item<double>() / y.norm().item<double>();
}

// A fresh leaf on `device` holding t's values: t.to(kCPU) would hand back t itself, so the CPU run
// would mark (and, in Adam's case, update) the very tensor the GPU run starts from.
inline torch::Tensor leaf_on(const torch::Tensor& t, const torch::Device& device) {
  return t.detach().clone().to(device).requires_grad_(true);
}

}  // namespace tandem::test
