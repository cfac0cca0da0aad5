#include "trainer/train/rng.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

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
  std::memcpy(state.data_ptr(), data, size);
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

bool set_dropout_rng_state(const std::string& bytes, const torch::Device& device) {
  const size_t header = sizeof kCudaFrame + sizeof(uint64_t);
  if (bytes.size() < header || bytes.compare(0, sizeof kCudaFrame, kCudaFrame, sizeof kCudaFrame)) {
    set_cpu_rng_state(bytes);
    return !device.is_cuda();
  }
  uint64_t cpu_size = 0;
  std::memcpy(&cpu_size, bytes.data() + sizeof kCudaFrame, sizeof cpu_size);
  if (cpu_size > bytes.size() - header) {
    throw std::runtime_error("a rank's RNG state in the checkpoint is truncated (" +
                             std::to_string(bytes.size()) + " bytes)");
  }
  set_cpu_rng_state(bytes.substr(header, cpu_size));
  if (!device.is_cuda()) return true;
  const size_t cuda_at = header + cpu_size;
  auto generator = cuda_generator(device);
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(tensor_of(bytes.data() + cuda_at, bytes.size() - cuda_at));
  return true;
}

}  // namespace tandem::train
