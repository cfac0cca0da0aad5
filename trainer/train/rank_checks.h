// Checks that the ranks hold what data parallelism needs: the same parameter layout at start, and
// bitwise the same parameters while training (a difference means a broken reduction or a
// nondeterministic kernel, and training on would be wasted). Both are collective.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/parallel/communicator.h"

namespace tandem::train {

// Compares a hash of every parameter's (name, shape, dtype); throws std::runtime_error naming the
// first rank that differs from rank 0.
void check_same_layout(const checkpoint::NamedTensors& params, parallel::Communicator& comm);

// Compares a hash of the parameters' bytes; throws std::runtime_error naming the step and every
// rank whose parameters differ from rank 0's.
void check_parameters_agree(const std::vector<torch::Tensor>& params, int64_t step,
                            parallel::Communicator& comm);

}  // namespace tandem::train
