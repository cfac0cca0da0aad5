#include "trainer/train/rng.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>
#include <torch/version.h>

#include <cstring>
#include <mutex>
#include <stdexcept>

namespace tandem::train {

namespace {

// Opens the framed CPU+CUDA form. A CPU generator's state starts with its seed (8 bytes), which
// would read as this only if it were about 4.7e18: dropout_seed gives that for train.seed > 4e12.
constexpr char kCudaFrame[8] = {'T', 'N', 'D', 'M', 'C', 'U', 'D', 'A'};

std::string bytes_of(const torch::Tensor& state) {
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

torch::Tensor tensor_of(const char* data, size_t size) {
  auto state = torch::empty({static_cast<int64_t>(size)}, torch::kUInt8);
  if (size > 0) std::memcpy(state.data_ptr(), data, size);  // an empty one's data_ptr() is null
  return state;
}

at::Generator cuda_generator(const torch::Device& device) {
  return at::globalContext().defaultGenerator(device);
}

}  // namespace

uint64_t dropout_seed(uint64_t seed, int rank) { return seed * 1000003ULL + 7919ULL * (rank + 1); }

std::string cpu_rng_state() { return bytes_of(at::detail::getDefaultCPUGenerator().get_state()); }

void set_cpu_rng_state(const std::string& bytes) {
  const auto state = tensor_of(bytes.data(), bytes.size());
  auto generator = at::detail::getDefaultCPUGenerator();  // a handle sharing the default's state
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

std::string dropout_rng_state(const torch::Device& device) {
  const std::string cpu = cpu_rng_state();
  if (!device.is_cuda()) return cpu;
  auto generator = cuda_generator(device);
  std::string cuda;
  {
    std::lock_guard<std::mutex> lock(generator.mutex());
    cuda = bytes_of(generator.get_state());
  }
  const uint64_t cpu_size = cpu.size();
  std::string framed(kCudaFrame, sizeof kCudaFrame);
  framed.append(reinterpret_cast<const char*>(&cpu_size), sizeof cpu_size);
  return framed + cpu + cuda;
}

// The CPU generator's part of dropout_rng_state's bytes, and whether a CUDA part follows it at
// `*cuda_at`; std::invalid_argument when the frame is cut short.
std::string cpu_part(const std::string& bytes, size_t* cuda_at) {
  const size_t header = sizeof kCudaFrame + sizeof(uint64_t);
  if (bytes.size() < header || bytes.compare(0, sizeof kCudaFrame, kCudaFrame, sizeof kCudaFrame)) {
    *cuda_at = std::string::npos;
    return bytes;
  }
  uint64_t cpu_size = 0;
  std::memcpy(&cpu_size, bytes.data() + sizeof kCudaFrame, sizeof cpu_size);
  if (cpu_size > bytes.size() - header) {
    throw std::invalid_argument("the RNG state is truncated (" + std::to_string(bytes.size()) +
                                " bytes, its CPU part says " + std::to_string(cpu_size) + ")");
  }
  *cuda_at = header + cpu_size;
  return bytes.substr(header, cpu_size);
}

void check_dropout_rng_state(const std::string& bytes) {
  size_t cuda_at;
  const std::string cpu = cpu_part(bytes, &cuda_at);
  at::Generator scratch = at::detail::createCPUGenerator();
  try {
    scratch.set_state(tensor_of(cpu.data(), cpu.size()));
  } catch (const c10::Error& e) {
    throw std::invalid_argument(
        std::string("the CPU RNG state is not one LibTorch " TORCH_VERSION " reads: ") +
        e.what_without_backtrace());
  }
}

bool set_dropout_rng_state(const std::string& bytes, const torch::Device& device) {
  check_dropout_rng_state(bytes);
  size_t cuda_at;
  set_cpu_rng_state(cpu_part(bytes, &cuda_at));
  if (cuda_at == std::string::npos) return !device.is_cuda();
  if (!device.is_cuda()) return true;
  auto generator = cuda_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(tensor_of(bytes.data() + cuda_at, bytes.size() - cuda_at));
  return true;
}

}  // namespace tandem::train
