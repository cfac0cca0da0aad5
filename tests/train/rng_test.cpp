// The checkpoint's RNG states: what resuming accepts, and that a state it refuses changes nothing.
#include "trainer/train/rng.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>
#include <stdexcept>
#include <string>

namespace tandem::train {
namespace {

std::string refusal(const std::string& bytes) {
  try {
    check_dropout_rng_state(bytes);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

// A GPU run's framing (dropout_rng_state on a GPU) around a CPU state, its CUDA part `cuda`.
std::string framed(const std::string& cpu, uint64_t cpu_size, const std::string& cuda) {
  std::string out = "TNDMCUDA";
  out.append(reinterpret_cast<const char*>(&cpu_size), sizeof cpu_size);
  return out + cpu + cuda;
}

// Found by tests/fuzz/checkpoint_fuzz.cpp: a damaged /rng/rank_<r> escaped as LibTorch's c10::Error
// on one rank at a time, after the others had gone on.
TEST(DropoutRngState, RefusesWhatLibTorchCannotReadAndChangesNothing) {
  torch::manual_seed(5);
  const std::string state = dropout_rng_state(torch::kCPU);
  EXPECT_EQ(refusal(state), "");
  EXPECT_EQ(refusal(framed(state, state.size(), "cuda part")), "");

  EXPECT_NE(refusal(state.substr(0, 27)).find("is not one LibTorch"), std::string::npos);
  EXPECT_NE(refusal("").find("is not one LibTorch"), std::string::npos);
  EXPECT_NE(refusal(framed(state, state.size() + 1, "")).find("truncated"), std::string::npos);
  EXPECT_NE(refusal(framed(state, ~uint64_t{0}, "x")).find("truncated"), std::string::npos);

  const std::string before = cpu_rng_state();
  EXPECT_THROW(set_dropout_rng_state(state.substr(1), torch::kCPU), std::invalid_argument);
  EXPECT_EQ(cpu_rng_state(), before);
  // A state it accepts is the one restored: the same numbers follow.
  const torch::Tensor first = torch::rand({4});
  EXPECT_TRUE(set_dropout_rng_state(framed(before, before.size(), ""), torch::kCPU));
  EXPECT_TRUE(torch::equal(torch::rand({4}), first));
}

}  // namespace
}  // namespace tandem::train
