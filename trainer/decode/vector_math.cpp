// Built with -ffast-math: see vector_math.h.
#include "trainer/decode/vector_math.h"

#include <cmath>

#define TANDEM_CLONES __attribute__((target_clones("avx2", "default")))

namespace tandem::decode {

TANDEM_CLONES float max_of(const float* x, int64_t n) {
  float top = x[0];
  for (int64_t j = 1; j < n; ++j) top = x[j] > top ? x[j] : top;
  return top;
}

TANDEM_CLONES float exp_sum(const float* x, int64_t n, float shift) {
  float sum = 0;
  for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - shift);
  return sum;
}

}  // namespace tandem::decode
