// A test-only way to make one rank fail mid-training, as a real fault would: the environment
// variable TANDEM_FAULT_INJECT="rank=R,step=S" makes rank R throw when it starts step S, and
// "rank=R,step=S,kind=nan_gradient" makes its gradients of step S non-finite instead.
#pragma once

#include <cstdint>

namespace tandem {

constexpr const char* kFaultInjectVariable = "TANDEM_FAULT_INJECT";

// Throws std::runtime_error("fault injected at step S on rank R (TANDEM_FAULT_INJECT)") when the
// variable asks for an error at this (rank, step); returns true when it asks for a non-finite
// gradient there (the caller makes one); false otherwise, and when it is unset. A malformed value
// is std::invalid_argument naming the variable and the expected form.
bool inject_fault_if_requested(int rank, int64_t step);

}  // namespace tandem
