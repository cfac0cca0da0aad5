#include "data/batching/batch_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tandem::data {
namespace {

struct Lengths {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
};

// Lengths 1..60 from a fixed LCG, so the plan's inputs are the same everywhere.
Lengths random_lengths(int count, uint32_t seed) {
  Lengths lengths;
  uint32_t state = seed;
  for (int i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    lengths.src.push_back(1 + static_cast<int32_t>((state >> 16) % 60));
    state = state * 1664525u + 1013904223u;
    lengths.tgt.push_back(1 + static_cast<int32_t>((state >> 16) % 60));
  }
  return lengths;
}

int64_t longest_in(const std::vector<int64_t>& batch, const Lengths& lengths) {
  int64_t longest = 0;
  for (const int64_t i : batch) {
    longest = std::max<int64_t>(longest, std::max(lengths.src[i], lengths.tgt[i]) + 1);
  }
  return longest;
}

// The plan as lists of sentence indices, from per-side lengths.
std::vector<std::vector<int64_t>> plan_of(const std::vector<int32_t>& src,
                                          const std::vector<int32_t>& tgt,
                                          const BatchPlanOptions& options, int64_t epoch) {
  return make_batch_plan(padded_lengths(src, tgt), options, epoch).batches();
}

BatchPlanOptions options_with(int64_t max_tokens, uint64_t seed) {
  BatchPlanOptions options;
  options.max_tokens = max_tokens;
  options.seed = seed;
  options.pool_batches = 10;
  return options;
}

TEST(PaddedLength, IsLongerSidePlusOne) {
  EXPECT_EQ(padded_length(3, 5), 6);
  EXPECT_EQ(padded_length(7, 2), 8);
  EXPECT_EQ(padded_length(0, 0), 1);
}

TEST(BatchPlan, EverySentenceAppearsExactlyOnce) {
  const Lengths lengths = random_lengths(1000, 7);
  const auto plan = plan_of(lengths.src, lengths.tgt, options_with(300, 1), 0);
  std::vector<int> seen(1000, 0);
  for (const auto& batch : plan) {
    EXPECT_FALSE(batch.empty());
    for (const int64_t i : batch) ++seen.at(i);
  }
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(seen[i], 1) << "sentence " << i;
}

TEST(BatchPlan, BatchesRespectTheTokenBudget) {
  const Lengths lengths = random_lengths(1000, 11);
  const auto plan = plan_of(lengths.src, lengths.tgt, options_with(300, 3), 0);
  for (const auto& batch : plan) {
    EXPECT_LE(static_cast<int64_t>(batch.size()) * longest_in(batch, lengths), 300);
  }
}

TEST(BatchPlan, SortingInsidePoolsKeepsPaddingLow) {
  const Lengths lengths = random_lengths(2000, 5);
  const auto plan = plan_of(lengths.src, lengths.tgt, options_with(600, 1), 0);
  int64_t real = 0, padded = 0;
  for (const auto& batch : plan) {
    padded += static_cast<int64_t>(batch.size()) * longest_in(batch, lengths);
    for (const int64_t i : batch) real += std::max(lengths.src[i], lengths.tgt[i]) + 1;
  }
  // Unsorted batches of uniform lengths 1..60 would waste about a third; sorted ones a few %.
  EXPECT_LT(static_cast<double>(padded) / static_cast<double>(real), 1.15);
}

TEST(BatchPlan, OversizedSentenceGetsABatchOfItsOwn) {
  Lengths lengths = random_lengths(200, 3);
  lengths.src[17] = 500;
  const auto plan = plan_of(lengths.src, lengths.tgt, options_with(300, 1), 0);
  int found = 0;
  for (const auto& batch : plan) {
    if (std::find(batch.begin(), batch.end(), 17) == batch.end()) continue;
    ++found;
    EXPECT_EQ(batch, std::vector<int64_t>{17});
  }
  EXPECT_EQ(found, 1);
}

TEST(BatchPlan, SameSeedAndEpochGiveTheSamePlan) {
  const Lengths lengths = random_lengths(500, 9);
  const auto a = plan_of(lengths.src, lengths.tgt, options_with(256, 42), 3);
  const auto b = plan_of(lengths.src, lengths.tgt, options_with(256, 42), 3);
  EXPECT_EQ(a, b);
}

TEST(BatchPlan, DiffersByEpochAndBySeed) {
  const Lengths lengths = random_lengths(500, 9);
  const auto base = plan_of(lengths.src, lengths.tgt, options_with(256, 42), 0);
  EXPECT_NE(base, plan_of(lengths.src, lengths.tgt, options_with(256, 42), 1));
  EXPECT_NE(base, plan_of(lengths.src, lengths.tgt, options_with(256, 43), 0));
}

// Pinned output: a change here means plans (and so resumed runs) differ from earlier builds.
TEST(BatchPlan, PlanIsPinnedAcrossMachines) {
  const std::vector<int32_t> src = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> tgt = {8, 7, 6, 5, 4, 3, 2, 1};
  BatchPlanOptions options;
  options.max_tokens = 20;
  options.seed = 1;
  options.pool_batches = 2;  // pools of 4 sentences (20 / mean padded length 7 = 2 per batch)
  // Pools {2,3,4,5} and {0,1,6,7} sort to padded 6,6,7,7 and 8,8,9,9; 3 x 7 > 20 cuts them in two.
  const std::vector<std::vector<int64_t>> expected = {{3, 4}, {7, 0}, {2, 5}, {6, 1}};
  EXPECT_EQ(plan_of(src, tgt, options, 0), expected);
}

TEST(BatchPlan, EmptyCorpusGivesAnEmptyPlan) {
  EXPECT_TRUE(plan_of({}, {}, BatchPlanOptions{}, 0).empty());
}

TEST(BatchPlan, MismatchedSidesAreRejected) {
  EXPECT_THROW(plan_of({1, 2}, {1}, BatchPlanOptions{}, 0), std::invalid_argument);
}

TEST(BatchPlan, NonPositiveBudgetIsRejected) {
  EXPECT_THROW(plan_of({1}, {1}, options_with(0, 1), 0), std::invalid_argument);
}

// The plan as it was computed before it was stored compactly (vectors of 64-bit indices, batches
// shuffled as vectors), written out naively here: the compact plan must be the same, so runs and
// checkpoints from earlier builds see the same batches.
std::vector<std::vector<int64_t>> reference_plan(const Lengths& lengths,
                                                 const BatchPlanOptions& options, int64_t epoch) {
  struct Rng {
    uint64_t state;
    uint64_t next() {
      uint64_t z = (state += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      return z ^ (z >> 31);
    }
    uint64_t below(uint64_t bound) {
      const uint64_t threshold = (0 - bound) % bound;
      for (uint64_t r = next();; r = next()) {
        if (r >= threshold) return r % bound;
      }
    }
  };
  Rng epoch_hash{static_cast<uint64_t>(epoch) ^ 0xD1B54A32D192ED03ull};
  Rng rng{options.seed ^ epoch_hash.next()};
  const size_t n = lengths.src.size();
  std::vector<int64_t> padded(n);
  int64_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    padded[i] = std::max(lengths.src[i], lengths.tgt[i]) + 1;
    total += padded[i];
  }
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  for (size_t i = n; i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
  const int64_t per_batch =
      std::max<int64_t>(1, options.max_tokens / std::max<int64_t>(1, total / n));
  const auto pool = static_cast<size_t>(per_batch * options.pool_batches);
  std::vector<std::vector<int64_t>> batches;
  for (size_t begin = 0; begin < n; begin += pool) {
    std::vector<int64_t> members(order.begin() + begin, order.begin() + std::min(n, begin + pool));
    std::stable_sort(members.begin(), members.end(),
                     [&](int64_t a, int64_t b) { return padded[a] < padded[b]; });
    std::vector<int64_t> batch;
    int64_t longest = 0;
    for (const int64_t sentence : members) {
      const int64_t longer = std::max(longest, padded[sentence]);
      if (!batch.empty() && static_cast<int64_t>(batch.size() + 1) * longer > options.max_tokens) {
        batches.push_back(batch);
        batch.clear();
        longest = 0;
      }
      batch.push_back(sentence);
      longest = std::max(longest, padded[sentence]);
    }
    if (!batch.empty()) batches.push_back(batch);
  }
  for (size_t i = batches.size(); i > 1; --i) std::swap(batches[i - 1], batches[rng.below(i)]);
  return batches;
}

TEST(BatchPlan, CompactPlanEqualsTheNaiveComputation) {
  const Lengths lengths = random_lengths(20000, 11);
  for (const int64_t epoch : {0, 1, 7}) {
    for (const BatchPlanOptions& options :
         {options_with(300, 1), options_with(2048, 99), BatchPlanOptions{}}) {
      const auto plan = make_batch_plan(padded_lengths(lengths.src, lengths.tgt), options, epoch);
      EXPECT_EQ(plan.batches(), reference_plan(lengths, options, epoch))
          << "epoch " << epoch << " max_tokens " << options.max_tokens;
      EXPECT_EQ(plan.batch(plan.size() - 1), plan.batches().back());
    }
  }
}

TEST(BatchPlan, AShareKeepsExactlyItsBatchesOfTheWholePlan) {
  const Lengths lengths = random_lengths(5000, 5);
  const auto padded = padded_lengths(lengths.src, lengths.tgt);
  const auto whole = make_batch_plan(padded, options_with(300, 1), 2).batches();
  ASSERT_GT(whole.size(), 20u);
  for (const auto& [first, stride] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 1}, {0, 2}, {1, 2}, {2, 3}, {3, 4}, {5, 7}, {0, 100000}}) {
    auto share = make_batch_plan(padded, options_with(300, 1), 2);
    share.keep_share(first, stride);
    EXPECT_EQ(share.size(), static_cast<int64_t>(whole.size()));
    for (int64_t index = 0; index < share.size(); ++index) {
      if (index >= first && (index - first) % stride == 0) {
        EXPECT_EQ(share.batch(index), whole[index]) << first << " + k * " << stride;
      } else {
        EXPECT_THROW(share.batch(index), std::out_of_range) << index;
      }
    }
    EXPECT_THROW(share.batch(share.size()), std::out_of_range);
    if (stride > 1) {
      EXPECT_THROW(share.keep_share(0, 1), std::invalid_argument);  // a share of a share
    }
  }
}

TEST(BatchPlan, PairsTooLongForSixteenBitsAreRejected) {
  EXPECT_NO_THROW(padded_lengths({65534}, {3}));
  EXPECT_THROW(padded_lengths({65535}, {3}), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::data
