// Comparing two training runs' checkpoints bitwise: weights, moving average, optimizer state and
// data position (settings that change nothing but memory: sharding, activation checkpointing).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {

inline void expect_same_tensors(const checkpoint::NamedTensors& a,
                                const checkpoint::NamedTensors& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first) << what;
    EXPECT_TRUE(torch::equal(a[i].second, b[i].second)) << what << "/" << a[i].first;
  }
}

// Checkpoint `file` of two runs holds bitwise the same weights, average and optimizer state.
inline void expect_same_checkpoint(const std::string& run_a, const std::string& run_b,
                                   const std::string& file) {
  const auto a = checkpoint::load(run_a + "/" + file);
  const auto b = checkpoint::load(run_b + "/" + file);
  expect_same_tensors(a.model, b.model, file + " /model");
  expect_same_tensors(a.ema, b.ema, file + " /ema");
  ASSERT_EQ(a.optimizer.size(), 2u);
  ASSERT_EQ(b.optimizer.size(), 2u);
  for (const auto& [group, tensors] : a.optimizer) {
    expect_same_tensors(tensors, b.optimizer.at(group), file + " /optimizer/" + group);
  }
  EXPECT_EQ(a.optimizer_step, b.optimizer_step);
  EXPECT_EQ(a.data_next_batch, b.data_next_batch);
}

}  // namespace tandem::test
