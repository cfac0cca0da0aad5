// The Philox4x32-10 behind the GPU's fused dropout, on the CPU: against ATen's own Philox engine
// (an independent implementation), the Random123 known-answer block, and the keep decision's
// bits and rate.
#include "trainer/kernels/cuda/philox.h"

#include <ATen/core/PhiloxRNGEngine.h>
#include <gtest/gtest.h>

#include <cstdint>

namespace tandem::kernels {
namespace {

TEST(Philox, ZeroCounterAndKeyGiveRandom123sKnownAnswer) {
  const auto b = philox::philox4x32_10(philox::Block{{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(b.word[0], 0x6627e8d5u);
  EXPECT_EQ(b.word[1], 0xe169c58du);
  EXPECT_EQ(b.word[2], 0xbc57ac4cu);
  EXPECT_EQ(b.word[3], 0x9b00dbd8u);
}

TEST(Philox, DrawsMatchATensEngineAtTheSameSeedSubsequenceAndOffset) {
  const uint64_t seeds[] = {0, 67280421310721ull, 0xFFFFFFFFFFFFFFFFull, 123456789ull << 33};
  const uint64_t offsets[] = {0, 4, 12, 4ull << 32, 0xFFFFFFFFFFFFFFF0ull};
  const uint64_t indices[] = {0, 1, 31, 1ull << 32, 0xFFFFFFFFull, 987654321987ull};
  for (const uint64_t seed : seeds) {
    for (const uint64_t offset : offsets) {
      for (const uint64_t index : indices) {
        at::philox_engine engine(seed, index, offset / 4);
        const auto b = philox::draw(seed, offset, index);
        for (int i = 0; i < 4; ++i) {
          EXPECT_EQ(b.word[i], engine())
              << "seed " << seed << " offset " << offset << " index " << index << " word " << i;
        }
      }
    }
  }
}

TEST(Philox, KeptTakesSixteenBitsAnElementLowHalfFirst) {
  const philox::Block bits{{0x00050004u, 0xFFFF0000u, 0x80007FFFu, 0x00010001u}};
  const bool at_5[] = {false, true, false, true, true, true, false, false};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(philox::kept(bits, i, 5), at_5[i]) << i;
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(philox::kept(bits, i, 0)) << i;
  for (int i = 0; i < 8; ++i) EXPECT_FALSE(philox::kept(bits, i, 65536)) << i;
}

TEST(Philox, KeepRateIsOneMinusP) {
  const uint32_t threshold = 6554;  // p = 0.1
  int64_t kept = 0;
  const int64_t runs = 1 << 17;
  for (int64_t r = 0; r < runs; ++r) {
    const auto b = philox::draw(42, 8, static_cast<uint64_t>(r));
    for (int i = 0; i < 8; ++i) kept += philox::kept(b, i, threshold) ? 1 : 0;
  }
  // 2^20 elements: one standard deviation of the rate is 0.0003.
  EXPECT_NEAR(static_cast<double>(kept) / static_cast<double>(runs * 8), 1.0 - 6554.0 / 65536.0,
              0.002);
}

}  // namespace
}  // namespace tandem::kernels
