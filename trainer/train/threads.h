// Intra-op CPU threads per rank: LibTorch's pool and OpenBLAS's own pool (which LibTorch does not
// control), so N ranks x T threads never oversubscribe the cores.
#pragma once

namespace tandem::train {

void set_compute_threads(int threads);

}  // namespace tandem::train
