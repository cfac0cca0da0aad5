// Elementwise passes over lists of fp32 tensors, many tensors a launch: the bf16 copies of the
// weights the linear layers compute with, and the moving average's update.
#pragma once

#include <cstdint>

namespace tandem::kernels::cuda {

// The parts of one pass: part i is counts[i] elements at sources[i] (fp32, contiguous) and the
// same number at targets[i]. Parts may be of any size, including 0.
struct PartList {
  const float* const* sources;
  void* const* targets;
  const int64_t* counts;
  int parts;
};

// targets[i][j] = sources[i][j] rounded to bf16 (to nearest, ties to even), for every part.
void to_bf16(const PartList& list, void* stream);

// The moving average's step, targets being the averages (fp32) and sources the parameters:
// average += weight · (parameter − average), rounded after the difference, the product and the
// sum each (never fused), as three multi-tensor passes would. weight: one fp32 on the device.
void moving_average(const PartList& list, const float* weight, void* stream);

}  // namespace tandem::kernels::cuda
