// Float loops that decoding runs over every row of the logits and every attention row,
// vectorized (-ffast-math, an AVX2 clone picked at load time).
#pragma once

#include <cstdint>

namespace tandem::kernels {

// Float loops that decoding runs over every row of the logits and over each attention row's
// scores: built in their own translation unit
// with -ffast-math (sums reassociated, so vectorized, and glibc's vector expf) and an AVX2 clone
// picked at load time. Their results differ from a sequential loop's in the last bits only.
// Input must be finite.

// The largest of x[0..n), n >= 1.
float max_of(const float* x, int64_t n);

// The sum of exp(x[j] - shift) over x[0..n).
float exp_sum(const float* x, int64_t n, float shift);

// x[j] = exp(x[j] - shift) over x[0..n), in place; returns their sum (summed as exp_sum).
float exp_in_place(float* x, int64_t n, float shift);

}  // namespace tandem::kernels
