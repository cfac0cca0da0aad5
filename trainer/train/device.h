// Where a rank trains: the CPU, or GPU local_rank of its host (one rank per GPU, as NCCL needs),
// and in which precision (bf16 autocast of the matrix products, fp32 weights and optimizer state).
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
// a CPU without AVX512_BF16 or AMX-BF16 falls back to fp32 with a log line (emulated bf16 is slower).
DeviceChoice choose_device(const config::TrainConfig& train, int local_rank, int local_size);

// Whether this CPU has bf16 dot-product instructions (AVX512_BF16 or AMX-BF16).
bool cpu_has_bf16_dot_product();

}  // namespace tandem::train
