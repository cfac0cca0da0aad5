// Per-process CPU settings for a rank: intra-op threads (LibTorch's pool and OpenBLAS's own pool,
// which LibTorch does not control, so N ranks x T threads never oversubscribe the cores) and the
// C allocator's policy for large blocks (peak memory of a training step).
#pragma once

namespace tandem::train {

// Sets the threads, the allocator policy (see tune_allocator) and oneDNN's cache.
void set_compute_threads(int threads);

// glibc malloc: blocks of 4 MiB and more come from mmap and go back to the system when freed.
// By default glibc raises that threshold each time such a block is freed (up to 32 MiB), after
// which a step's activations are carved from the heap, which fragments and keeps its peak:
// measured on the tiny model, 5-10% more peak RSS per rank (most with 2 ranks). The price is a
// few percent of a step in page faults. No-op on other C libraries.
void tune_allocator();

// oneDNN (LibTorch's bf16 matrix products on CPU) caches up to 1024 primitives by shape, each
// holding buffers of several MB. Batch shapes change every step, so the cache grows for hundreds
// of steps; none is kept. Measured on the tiny shape in bf16, one rank (tandem-bench, two runs
// each, alternating): peak RSS 1384 MB with the default, 1071-1105 MB with 16 primitives at
// 2552-2634 tokens/s, and 968 MB with none at 2439-2486 tokens/s (building each primitive anew).
constexpr int kOneDnnCachedPrimitives = 0;
void limit_onednn_cache();

}  // namespace tandem::train
