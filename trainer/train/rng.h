// The random streams of training. Dropout draws from LibTorch's default generators; their streams
// differ per rank (different data deserves independent masks) but are fixed by train.seed, so a
// run is reproducible at a given world size, and the CPU generator's state is checkpointed.
#pragma once

#include <torch/types.h>

#include <cstdint>
#include <string>

namespace tandem::train {

// The dropout seed of `rank` for train.seed `seed`.
uint64_t dropout_seed(uint64_t seed, int rank);

// The default CPU generator's state as bytes, and back.
std::string cpu_rng_state();
void set_cpu_rng_state(const std::string& bytes);

// The dropout streams of a rank that trains on `device`, as a checkpoint keeps them: the CPU
// generator's state alone (the bytes of cpu_rng_state) on a CPU; on a GPU a framed pair of it and
// that GPU's default CUDA generator's state (seed and offset of its Philox stream).
std::string dropout_rng_state(const torch::Device& device);
// Restores dropout_rng_state's bytes; returns false, restoring only the CPU stream, when they hold
// no CUDA state (written on a CPU, or by an older Tandem) although `device` is a GPU. Bytes that
// check_dropout_rng_state refuses change nothing.
bool set_dropout_rng_state(const std::string& bytes, const torch::Device& device);
// std::invalid_argument unless the bytes are dropout_rng_state's, as far as a machine without a
// GPU can tell (the frame, and a CPU state this LibTorch reads): resuming checks every rank's state
// where the checkpoint is read, before any rank sets its own.
void check_dropout_rng_state(const std::string& bytes);

}  // namespace tandem::train
