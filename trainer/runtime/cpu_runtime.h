// Per-process CPU runtime settings of a tool: intra-op threads (LibTorch's pool and OpenBLAS's own
// pool, which LibTorch does not control, so N ranks x T threads never oversubscribe the cores), the
// C allocator's policy for large blocks, and oneDNN's primitive cache (peak memory of a step).
#pragma once

#include <cstdint>

namespace tandem::runtime {

// What the process mostly does, for the allocator's policy (tune_allocator).
enum class Workload { kTraining, kDecoding, kConversion };

struct CpuRuntimeOptions {
  int threads = 1;           // intra-op threads, >= 1
  int64_t onednn_cache = 0;  // oneDNN primitives kept for reuse (train.onednn_cache explains)
  Workload workload = Workload::kTraining;
};

// Applies all of them: the threads, the allocator policy (tune_allocator) and oneDNN's cache.
void configure_cpu_runtime(const CpuRuntimeOptions& options);

// glibc malloc, no-op on other C libraries.
// Training: blocks of 4 MiB and more come from mmap and go back to the system when freed. By
// default glibc raises that threshold each time such a block is freed (up to 32 MiB), after which
// a step's activations are carved from the heap, which fragments and keeps its peak: measured on
// the tiny model, 5-10% more peak RSS per rank (most with 2 ranks). The price is a few percent of
// a step in page faults.
// Conversion (tandem-import): tensors read, rearranged and written one at a time, as training's
// blocks: without the fixed threshold, the 3.3B model's freed layers stayed in the heap and its
// import peaked at 5.0 GB instead of 2.3 GB (the embedding, 2.1 GB, and a block of rows).
// Decoding: every step allocates and frees the logits [rows, vocab] (16 MB at 500 rows of 8000)
// and their log-probabilities; from mmap, each step pays their page faults again (6% of beam-4
// time on the tiny model, one thread). Blocks up to glibc's ceiling of 32 MiB come from the heap
// and its top is not given back, so the next step reuses the same pages.
void tune_allocator(Workload workload);

// Caps oneDNN's cache of primitives (LibTorch's bf16 matrix products on CPU) at `primitives`;
// nothing happens where LibTorch has no oneDNN.
void set_onednn_cache(int64_t primitives);

}  // namespace tandem::runtime
