// Averaging gradients across ranks: every parameter's gradient is flattened into one contiguous
// buffer, summed with a single all-reduce, scaled, and copied back. A rank without data this step
// contributes zeros, so the result is the same as one process that saw every rank's batch.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "trainer/dist/communicator.h"

namespace tandem::dist {

class GradientReducer {
 public:
  GradientReducer(std::vector<torch::Tensor> params, Communicator& comm);

  // grad <- scale * sum over ranks of grad, for every parameter (undefined grads count as zero
  // and are defined afterwards).
  void all_reduce(double scale);

 private:
  std::vector<torch::Tensor> params_;
  Communicator& comm_;
  torch::Tensor flat_;  // [total elements] float32, reused every step
};

}  // namespace tandem::dist
