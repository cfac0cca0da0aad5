// The accumulation a relaunch at another rank count gets: the global batch kept as close as it can.
#include "trainer/train/global_batch.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace tandem::train {
namespace {

TEST(GlobalBatch, AccumulationKeepsTheGlobalBatchAsCloseAsItCan) {
  for (int64_t accum = 1; accum <= 8; ++accum) {
    for (int before = 1; before <= 16; ++before) {
      for (int ranks = 1; ranks <= 16; ++ranks) {
        // The naive way: every candidate accumulation, the closest product wins, the lower on ties.
        int64_t best = 1;
        for (int64_t a = 1; a <= accum * before + 1; ++a) {
          if (std::llabs(a * ranks - accum * before) < std::llabs(best * ranks - accum * before)) {
            best = a;
          }
        }
        EXPECT_EQ(accumulation_for(accum, before, ranks), best)
            << accum << " x " << before << " ranks, now " << ranks;
      }
    }
  }
  EXPECT_EQ(accumulation_for(1, 2, 1), 2);
  EXPECT_EQ(accumulation_for(2, 8, 6), 3);  // 16 tokens' worth: 6 x 3 = 18 beats 6 x 2 = 12
}

}  // namespace
}  // namespace tandem::train
