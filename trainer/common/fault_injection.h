// A test-only way to make one rank fail mid-training, as a real fault would: the environment
// variable TANDEM_FAULT_INJECT="rank=R,step=S" makes rank R throw when it starts step S.
#pragma once

#include <cstdint>

namespace tandem {

constexpr const char* kFaultInjectVariable = "TANDEM_FAULT_INJECT";

// Throws std::runtime_error("fault injected at step S on rank R (TANDEM_FAULT_INJECT)") when the
// variable asks for this (rank, step); does nothing when it is unset. A malformed value is
// std::invalid_argument naming the variable and the expected form.
void inject_fault_if_requested(int rank, int64_t step);

}  // namespace tandem
