// tandem-bench-data's measurement: what the data path costs one training rank on a corpus: start-up
// (lengths and the first plan), the tokens/s its loader delivers without and with prefetching, and
// how long next_step() still blocks beside a stand-in step; printed, then one JSON line.
#pragma once

#include <cstdint>
#include <string>

#include "data/batching/batch_plan.h"

namespace tandem::bench {

struct DataBenchOptions {
  std::string corpus;
  int world = 1;  // ranks of the simulated job
  int rank = 0;   // the rank measured: its batches are the ones read
  data::BatchPlanOptions plan;
  int64_t accum = 1;     // batches per step (train.accum_steps)
  int64_t prefetch = 2;  // data.prefetch_steps of the prefetched runs
  int64_t warmup = 5;    // steps read before each measurement
  int64_t steps = 50;    // steps per window
  int windows = 5;       // windows; medians are reported
  double step_ms = 50;   // the training thread's stand-in work per step in the overlap run
};

// Measures and prints; returns the tool's exit code.
int run_data_bench(const DataBenchOptions& options);

}  // namespace tandem::bench
