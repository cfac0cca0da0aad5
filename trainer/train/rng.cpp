#include "trainer/train/rng.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cstring>
#include <mutex>

namespace tandem::train {

uint64_t dropout_seed(uint64_t seed, int rank) { return seed * 1000003ULL + 7919ULL * (rank + 1); }

std::string cpu_rng_state() {
  auto state = at::detail::getDefaultCPUGenerator().get_state();
  return std::string(static_cast<const char*>(state.data_ptr()), state.numel());
}

void set_cpu_rng_state(const std::string& bytes) {
  auto state = torch::empty({static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  std::memcpy(state.data_ptr(), bytes.data(), bytes.size());
  auto generator = at::detail::getDefaultCPUGenerator();  // a handle sharing the default's state
  std::lock_guard<std::mutex> lock(generator.mutex());
  generator.set_state(state);
}

}  // namespace tandem::train
