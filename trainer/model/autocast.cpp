#include "trainer/model/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

// LibTorch 2.4 names autocast's state by device type; 1.13 .. 2.3 have one call per device.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define TANDEM_HAVE_AUTOCAST_API 1
#endif

namespace tandem::model {

bool autocast_enabled(const torch::Device& device) {
#ifdef TANDEM_HAVE_AUTOCAST_API
  return at::autocast::is_autocast_enabled(device.is_cuda() ? at::kCUDA : at::kCPU);
#else
  return device.is_cuda() ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

bool bf16_stream(const torch::Device& device) {
  return device.is_cuda() && autocast_enabled(device);
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

}  // namespace tandem::model
