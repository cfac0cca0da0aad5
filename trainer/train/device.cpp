#include "trainer/train/device.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <stdexcept>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "trainer/common/log.h"
#include "trainer/parallel/process_group.h"

#include <ATen/autocast_mode.h>

// LibTorch 2.4 names autocast's state by device type; 1.13 .. 2.3 have one call per device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TANDEM_HAVE_AUTOCAST_API 1
#endif

namespace tandem::train {
namespace {

DeviceChoice on_gpu(const config::TrainConfig& train, int local_rank, int local_size) {
  const int gpus = static_cast<int>(torch::cuda::device_count());
  if (local_size > gpus) {
    throw std::invalid_argument("train.device " + train.device + ": " +
                                std::to_string(local_size) + " ranks on this host but " +
                                std::to_string(gpus) +
                                " visible GPU(s); start one rank per GPU (NCCL cannot share one)");
  }
#ifndef TANDEM_HAVE_NCCL
  throw std::invalid_argument("train.device " + train.device +
                              ": this build has no NCCL backend (configure with -DTANDEM_CUDA=ON)");
#endif
  DeviceChoice choice;
  choice.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  choice.bf16 = train.precision == "bf16";
#ifdef TANDEM_HAVE_NCCL
  choice.description = "cuda:" + std::to_string(local_rank) + " (" + parallel::gpu_name(local_rank) + ")";
#endif
  return choice;
}

}  // namespace

DeviceChoice choose_device(const config::TrainConfig& train, int local_rank, int local_size) {
  const bool have_cuda = torch::cuda::is_available();
  if (train.device == "cuda" && !have_cuda) {
    throw std::invalid_argument(
        "train.device cuda: no GPU is usable (LibTorch built without CUDA, or no device visible)");
  }
  if (train.device == "cuda" || (train.device == "auto" && have_cuda)) {
    return on_gpu(train, local_rank, local_size);
  }
  // Without bf16 dot-product instructions oneDNN emulates bf16 products, slower than fp32 ones:
  // bf16 is a speed setting, so it is dropped there rather than slowing training down.
  bool bf16 = train.precision == "bf16";
  if (bf16 && !cpu_has_bf16_dot_product()) {
    log::info("train.precision bf16: this CPU has no AVX512_BF16 or AMX-BF16; training in fp32");
    bf16 = false;
  }
  return DeviceChoice{torch::Device(torch::kCPU), bf16, "cpu"};
}

bool cpu_has_bf16_dot_product() {
#if defined(__x86_64__) && defined(__GNUC__)
  // oneDNN (LibTorch's bf16 matrix products on CPU) runs them natively on these instructions.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5))) return true;  // AVX512_BF16
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22))) return true;  // AMX-BF16
#endif
  return false;
}

bool autocast_enabled(const torch::Device& device) {
#ifdef TANDEM_HAVE_AUTOCAST_API
  return at::autocast::is_autocast_enabled(device.is_cuda() ? at::kCUDA : at::kCPU);
#else
  return device.is_cuda() ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

namespace {

void set_autocast(bool cuda, bool enabled) {
#ifdef TANDEM_HAVE_AUTOCAST_API
  const auto type = cuda ? at::kCUDA : at::kCPU;
  at::autocast::set_autocast_dtype(type, at::kBFloat16);
  at::autocast::set_autocast_enabled(type, enabled);
#else
  if (cuda) {
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

}  // namespace

AutocastGuard::AutocastGuard(bool enabled, const torch::Device& device)
    : enabled_(enabled), cuda_(device.is_cuda()) {
  if (!enabled_) return;
  was_enabled_ = autocast_enabled(device);
  set_autocast(cuda_, true);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
  // The cast weights are cached while autocast is on; drop them when the outermost guard ends,
  // since the optimizer changes the weights before the next forward pass.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_autocast(cuda_, was_enabled_);
}

}  // namespace tandem::train
