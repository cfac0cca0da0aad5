// Checkpoint averaging (the offline kind, as fairseq's average_checkpoints.py): the elementwise
// mean of the /model parameters of several checkpoints of one model, as a new optimizer-free
// checkpoint that tandem-eval and tandem-decode read like any other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"

namespace tandem::checkpoint {

// The newest `count` step-*.h5 files in `dir` (by the step in their names), oldest first.
// std::invalid_argument naming `dir` when it is missing or holds fewer.
std::vector<std::string> last_step_files(const std::string& dir, int64_t count);

// Reads `paths` one at a time (memory: two checkpoints plus float64 sums) and returns their mean:
// each /model tensor summed in float64, divided by the count and stored in the dtype it has in the
// newest input (integer tensors rounded to nearest). Step, world size, config and vocabulary come
// from the newest input (highest step; the later one in `paths` on a tie); no optimizer, RNG or
// data position; averaged_from = `paths`. When every input holds a moving average (/ema), those are
// averaged alike (float32); otherwise the result has none. std::invalid_argument for no paths, an
// unreadable input (load's one-line error) or names and shapes that differ from the first input's
// (naming both).
CheckpointData average(const std::vector<std::string>& paths);

}  // namespace tandem::checkpoint
