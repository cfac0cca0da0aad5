// The random streams of training. Dropout draws from LibTorch's default generators; their streams
// differ per rank (different data deserves independent masks) but are fixed by train.seed, so a
// run is reproducible at a given world size, and the CPU generator's state is checkpointed.
#pragma once

#include <cstdint>
#include <string>

namespace tandem::train {

// The dropout seed of `rank` for train.seed `seed`.
uint64_t dropout_seed(uint64_t seed, int rank);

// The default CPU generator's state as bytes, and back.
std::string cpu_rng_state();
void set_cpu_rng_state(const std::string& bytes);

}  // namespace tandem::train
