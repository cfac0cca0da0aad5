// Where a rank trains: the CPU, or GPU local_rank of its host (one rank per GPU, as NCCL needs),
// and in which precision (bf16 autocast of the matrix products, fp32 weights and optimizer state).
#pragma once

#include <torch/torch.h>

#include <string>

#include "trainer/config/config.h"

namespace tandem::runtime {

struct DeviceChoice {
  torch::Device device{torch::kCPU};
  bool bf16 = false;        // autocast matrix products to bfloat16
  std::string description;  // for the banner: "cpu" or "cuda:0 (NVIDIA H100 ...)"
};

// Resolves train.device / train.precision for the rank with this local rank among local_size
// ranks on its host. auto takes the GPU where LibTorch has CUDA and a GPU is visible; cuda without
// one throws std::invalid_argument, as does a GPU count gpu_for_local_rank refuses. The chosen GPU
// is made the current CUDA device here. bf16 on a CPU without AVX512_BF16 or AMX-BF16 falls back
// to fp32 with a log line (emulated bf16 is slower).
DeviceChoice choose_device(const config::TrainConfig& train, int local_rank, int local_size);

// The index, among the `visible` GPUs this process sees, of the GPU of local rank `local_rank` of
// `local_size`: local_rank when the rank sees them all (visible >= local_size), local_rank modulo
// visible when it sees exactly one (SLURM's --gpus-per-task=1, CUDA_VISIBLE_DEVICES per rank).
// Between the two, ranks would have to share a GPU, which NCCL cannot: std::invalid_argument.
int gpu_for_local_rank(int local_rank, int local_size, int visible);

// Where the inference tools (tandem-eval, tandem-decode, tandem-bench-decode) run, from --device:
// cpu; cuda (GPU 0) or cuda:N; auto (GPU 0 where LibTorch sees one, else the CPU). A GPU that is
// not there, or any other text, is a std::invalid_argument naming the flag. The GPU chosen is made
// the current CUDA device.
torch::Device inference_device(const std::string& flag);

// Whether this CPU has bf16 dot-product instructions (AVX512_BF16 or AMX-BF16).
bool cpu_has_bf16_dot_product();

}  // namespace tandem::runtime
