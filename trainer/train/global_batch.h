// The global batch across rank counts: a job relaunched at fewer (or more) ranks keeps its tokens
// per step by raising (or lowering) train.accum_steps (tandem-train --keep-global-batch).
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::train {

// The accumulation that keeps ranks x accumulation as close as it can to `ranks_before` x
// `accum_before` at `ranks` (at least 1; the lower one when two are as close).
inline int64_t accumulation_for(int64_t accum_before, int ranks_before, int ranks) {
  const int64_t total = accum_before * ranks_before;
  const int64_t lower = std::max<int64_t>(1, total / ranks);
  const int64_t upper = lower + 1;
  return total - lower * ranks <= upper * ranks - total ? lower : upper;
}

}  // namespace tandem::train
