// Where a rank trains: the CPU, or GPU local_rank of its host (one rank per GPU, as NCCL needs),
// and in which precision (bf16 autocast on the GPU, fp32 weights and optimizer state).
#pragma once

#include <torch/torch.h>

#include <string>

#include "trainer/config/config.h"

namespace tandem::train {

struct DeviceChoice {
  torch::Device device{torch::kCPU};
  bool bf16 = false;        // autocast matrix products to bfloat16
  std::string description;  // for the banner: "cpu" or "cuda:0 (NVIDIA H100 ...)"
};

// Resolves train.device / train.precision for the rank with this local rank among local_size
// ranks on its host. auto takes the GPU where LibTorch has CUDA and the host has a GPU per local
// rank; cuda without one, or fewer GPUs than local ranks, throws std::invalid_argument. bf16 on
// the CPU (auto on a machine without GPU) falls back to fp32 with a log line.
DeviceChoice choose_device(const config::TrainConfig& train, int local_rank, int local_size);

// bf16 autocast for CUDA operations while alive, when enabled (LibTorch >= 2.4 API).
class AutocastGuard {
 public:
  explicit AutocastGuard(bool enabled);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool enabled_;
  bool was_enabled_ = false;
};

}  // namespace tandem::train
