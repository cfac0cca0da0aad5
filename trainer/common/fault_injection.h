// A test-only way to make one rank fail mid-training, as a real fault would: the environment
// variable TANDEM_FAULT_INJECT="rank=R,step=S" makes rank R throw when it starts step S;
// kind=nan_gradient makes its gradients of step S non-finite instead, kind=sigkill kills it and
// kind=sigstop freezes it; restart=N does it only in the job's Nth restart (0: the first run).
// In a chunked job (tandem-decode, tandem-score --output), step S is the rank's S-th chunk of the
// run, from 0: which chunks a rank gets varies from run to run, how many it has done does not.
#pragma once

#include <cstdint>

namespace tandem {

constexpr const char* kFaultInjectVariable = "TANDEM_FAULT_INJECT";
// How many times the launcher has restarted the job this rank belongs to (tandem-train
// --max-restarts sets it for every rank; unset counts as 0).
constexpr const char* kRestartCountVariable = "TANDEM_RESTART";

// Throws std::runtime_error("fault injected at step S on rank R (TANDEM_FAULT_INJECT)") when the
// variable asks for an error at this (rank, step), and raises SIGKILL or SIGSTOP when it asks for
// those; returns true when it asks for a non-finite gradient there (the caller makes one); false
// otherwise, and when it is unset. A malformed value is std::invalid_argument naming the variable
// and the expected form.
bool inject_fault_if_requested(int rank, int64_t step);

}  // namespace tandem
