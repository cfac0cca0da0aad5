// Built with -ffast-math: see vector_math.h.
#include "trainer/kernels/cpu/vector_math.h"

#include <cmath>

#define TANDEM_CLONES __attribute__((target_clones("avx2", "default")))

namespace tandem::kernels {

TANDEM_CLONES float max_of(const float* x, int64_t n) {
  float top = x[0];
  for (int64_t j = 1; j < n; ++j) top = x[j] > top ? x[j] : top;
  return top;
}

// Summed in chunks: where the loop is vectorized the chunk's sum is, and where it is not (clang
// at -O1, the sanitizer builds) no float accumulator adds more than kChunk terms in a row, which
// keeps the rounding of 8000-entry rows near a vectorized sum's (2e-6 against 3e-5 in one sum).
constexpr int64_t kChunk = 256;

TANDEM_CLONES float exp_sum(const float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = begin + kChunk < n ? begin + kChunk : n;
    float part = 0;
    for (int64_t j = begin; j < end; ++j) part += std::exp(x[j] - shift);
    sum += part;
  }
  return sum;
}

TANDEM_CLONES float exp_in_place(float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t begin = 0; begin < n; begin += kChunk) {
    const int64_t end = begin + kChunk < n ? begin + kChunk : n;
    float part = 0;
    for (int64_t j = begin; j < end; ++j) {
      x[j] = std::exp(x[j] - shift);
      part += x[j];
    }
    sum += part;
  }
  return sum;
}

}  // namespace tandem::kernels
