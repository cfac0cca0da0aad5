#include "trainer/runtime/device.h"

#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/version.h>

#include <cstdlib>
#include <sstream>
#include <stdexcept>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "trainer/common/log.h"
#include "trainer/common/whole_number.h"
#include "trainer/parallel/process_group.h"

namespace tandem::runtime {
namespace {

// What `setting` (a config key or a flag, with its value) asks for when LibTorch has no GPU.
std::invalid_argument no_gpu(const std::string& setting) {
  return std::invalid_argument(
      setting + ": no GPU is usable (LibTorch built without CUDA, or no device visible)");
}

#ifdef TANDEM_HAVE_NCCL  // a GPU build
// LibTorch 2.2 has a switch per attention kernel (cuDNN's among them).
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 2)
#define TANDEM_HAVE_SDPA_SWITCHES 1
#endif

// The attention kernels LibTorch may pick on a GPU. By default all but cuDNN's: on an H200
// (LibTorch 2.11, sentences of ~30 tokens) training steps ran 1.34x faster with flash and
// memory-efficient attention than with cuDNN's for the base shape at 32k tokens, 1.12x for the
// big shape. TANDEM_SDPA=flash,efficient,cudnn,math (any of them) chooses; for comparing them.
void allow_attention_kernels() {
  const char* env = std::getenv("TANDEM_SDPA");
  const bool chosen = env != nullptr && *env != '\0';
  const std::string list = chosen ? env : "flash,efficient,math";
  bool flash = false, efficient = false, cudnn = false, math = false;
  std::istringstream names(list);
  for (std::string name; std::getline(names, name, ',');) {
    bool* flag = name == "flash"       ? &flash
                 : name == "efficient" ? &efficient
                 : name == "cudnn"     ? &cudnn
                 : name == "math"      ? &math
                                       : nullptr;
    if (flag == nullptr) {
      throw std::invalid_argument("TANDEM_SDPA='" + list + "': unknown kernel '" + name +
                                  "' (expected flash, efficient, cudnn, math, comma-separated)");
    }
    *flag = true;
  }
#ifdef TANDEM_HAVE_SDPA_SWITCHES
  auto& context = at::globalContext();
  context.setSDPUseFlash(flash);
  context.setSDPUseMemEfficient(efficient);
  context.setSDPUseCuDNN(cudnn);
  context.setSDPUseMath(math);
  if (chosen) log::info("attention kernels allowed on the GPU (TANDEM_SDPA): " + list);
#else
  if (chosen) {
    throw std::invalid_argument("TANDEM_SDPA='" + list +
                                "': this LibTorch (" TORCH_VERSION
                                ") has no per-kernel switches (LibTorch >= 2.2)");
  }
#endif
}

// Every GPU a tool runs on, training's and decoding's: current for LibTorch's allocations and
// kernels (and NCCL's), with the attention kernels chosen.
void use_gpu(int gpu) {
  parallel::set_current_gpu(gpu);
  allow_attention_kernels();
}
#endif

DeviceChoice on_gpu(const config::TrainConfig& train, int local_rank, int local_size) {
  const std::string key = "train.device " + std::string(config::name_of(train.device)) + ": ";
  int gpu = 0;
  try {
    gpu = gpu_for_local_rank(local_rank, local_size, static_cast<int>(torch::cuda::device_count()));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(key + e.what());
  }
#ifndef TANDEM_HAVE_NCCL
  (void)gpu;
  throw std::invalid_argument(key +
                              "this build has no NCCL backend (configure with -DTANDEM_CUDA=ON)");
#else
  use_gpu(gpu);
  DeviceChoice choice;
  choice.device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
  choice.bf16 = train.precision == config::Precision::kBf16;
  choice.description = "cuda:" + std::to_string(gpu) + " (" + parallel::gpu_name(gpu) + ")";
  return choice;
#endif
}

}  // namespace

int gpu_for_local_rank(int local_rank, int local_size, int visible) {
  if (visible >= local_size) return local_rank;
  if (visible == 1) return local_rank % visible;
  throw std::invalid_argument(std::to_string(local_size) + " ranks on this host but " +
                              std::to_string(visible) +
                              " visible GPU(s); start one rank per GPU (NCCL cannot share one), or "
                              "show each rank exactly one GPU (CUDA_VISIBLE_DEVICES)");
}

DeviceChoice choose_device(const config::TrainConfig& train, int local_rank, int local_size) {
  const bool have_cuda = torch::cuda::is_available();
  if (train.device == config::Device::kCuda && !have_cuda) throw no_gpu("train.device cuda");
  if (train.device == config::Device::kCuda ||
      (train.device == config::Device::kAuto && have_cuda)) {
    return on_gpu(train, local_rank, local_size);
  }
  // Without bf16 dot-product instructions oneDNN emulates bf16 products, slower than fp32 ones:
  // bf16 is a speed setting, so it is dropped there rather than slowing training down.
  bool bf16 = train.precision == config::Precision::kBf16;
  if (bf16 && !cpu_has_bf16_dot_product()) {
    log::info("train.precision bf16: this CPU has no AVX512_BF16 or AMX-BF16; training in fp32");
    bf16 = false;
  }
  return DeviceChoice{torch::Device(torch::kCPU), bf16, "cpu"};
}

torch::Device inference_device(const std::string& flag) {
  const bool have_cuda = torch::cuda::is_available();
  if (flag == "cpu" || (flag == "auto" && !have_cuda)) return torch::Device(torch::kCPU);
  const std::string key = "--device '" + flag + "'";
  int gpu = 0;
  if (flag != "auto" && flag != "cuda") {
    const std::string prefix = "cuda:";
    const std::string index = flag.rfind(prefix, 0) == 0 ? flag.substr(prefix.size()) : "";
    if (index.empty() || index.size() > 4 ||
        index.find_first_not_of("0123456789") != std::string::npos) {
      throw std::invalid_argument(key + ": expected cpu, cuda, cuda:N or auto");
    }
    gpu = static_cast<int>(parse_whole_number(index).value_or(0));
  }
  if (!have_cuda) throw no_gpu(key);
  const auto visible = static_cast<int>(torch::cuda::device_count());
  if (gpu >= visible) {
    throw std::invalid_argument(key + ": this process sees " + std::to_string(visible) +
                                " GPU(s), numbered from 0");
  }
#ifdef TANDEM_HAVE_NCCL
  use_gpu(gpu);
#endif
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(gpu));
}

bool cpu_has_bf16_dot_product() {
#if defined(__x86_64__) && defined(__GNUC__)
  // oneDNN (LibTorch's bf16 matrix products on CPU) runs them natively on these instructions.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) && (eax & (1u << 5)))
    return true;  // AVX512_BF16
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx & (1u << 22)))
    return true;  // AMX-BF16
#endif
  return false;
}

}  // namespace tandem::runtime
