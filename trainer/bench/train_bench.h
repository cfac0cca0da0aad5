// tandem-bench's measurement: training steps timed in windows on every rank (in this process or
// under mpirun), reported with their FLOPs, MFU and memory, optionally beside the PyTorch
// yardstick.
#pragma once

#include <string>
#include <vector>

#include "trainer/parallel/process_group.h"
#include "trainer/bench/pytorch.h"

namespace tandem::bench {

struct TrainBenchFlags {
  std::string corpus, config_path, worker_dir;  // worker_dir: a rank under mpirun (hidden)
  int ranks = 1, threads = 1, warmup = 3, steps = 10, windows = 3;
  bool pytorch = false;
  std::string pytorch_precision;  // "" = the precision Tandem trained in
  double peak_tflops = 0;         // 0: from the device name where known
  std::vector<std::string> overrides;
  std::string profile;  // "": no trace; else a Chrome trace of --steps more steps, rank 0
  YardstickOptions yardstick;
};

// Measures and prints; `group` is this process's rank when it measures in-process (--ranks 1),
// else null (the ranks run under mpirun). Returns the tool's exit code.
int run_train_bench(const TrainBenchFlags& flags, parallel::ProcessGroup* group);

// The hidden worker mode: one rank under mpirun; rank 0 writes the measurement for the launcher.
int train_bench_worker(int argc, char** argv, const TrainBenchFlags& flags);

}  // namespace tandem::bench
