#include "trainer/train/device.h"

#include <torch/cuda.h>
#include <torch/version.h>

#include <stdexcept>

#include "trainer/common/log.h"
#include "trainer/dist/process_group.h"

#if TORCH_VERSION_MAJOR >= 2
#include <ATen/autocast_mode.h>
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
#ifndef TANDEM_HAVE_AUTOCAST_API
  if (train.precision == "bf16") {
    throw std::invalid_argument("train.precision bf16: needs LibTorch >= 2.4 (this is " +
                                std::string(TORCH_VERSION) + ")");
  }
#endif
  DeviceChoice choice;
  choice.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank));
  choice.bf16 = train.precision == "bf16";
#ifdef TANDEM_HAVE_NCCL
  choice.description = "cuda:" + std::to_string(local_rank) + " (" + dist::gpu_name(local_rank) + ")";
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
  if (train.precision == "bf16") {
    log::info("train.precision bf16 needs a GPU; training in fp32 on the CPU");
  }
  return DeviceChoice{torch::Device(torch::kCPU), false, "cpu"};
}

AutocastGuard::AutocastGuard(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
#ifdef TANDEM_HAVE_AUTOCAST_API
  was_enabled_ = at::autocast::is_autocast_enabled(at::kCUDA);
  at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
  at::autocast::set_autocast_enabled(at::kCUDA, true);
  at::autocast::increment_nesting();
#endif
}

AutocastGuard::~AutocastGuard() {
  if (!enabled_) return;
#ifdef TANDEM_HAVE_AUTOCAST_API
  // The cast weights are cached while autocast is on; drop them when the outermost guard ends,
  // since the optimizer changes the weights before the next forward pass.
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(at::kCUDA, was_enabled_);
#endif
}

}  // namespace tandem::train
