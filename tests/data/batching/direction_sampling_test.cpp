// The sampling policy across a file's directions (tandem-prep --corpora, data.temperature,
// data.weights): the shares it gives each direction, the draws that realise them in a batch plan,
// and data.weights matched against the directions by name.
#include "data/batching/direction_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::data {
namespace {

struct Lengths {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
};

// `count` pairs of lengths 1..longest on each side from a fixed LCG, appended to `lengths`.
void add_lengths(Lengths& lengths, int count, uint32_t seed, int32_t longest) {
  uint32_t state = seed;
  for (int i = 0; i < count; ++i) {
    state = state * 1664525u + 1013904223u;
    lengths.src.push_back(1 + static_cast<int32_t>((state >> 16) % longest));
    state = state * 1664525u + 1013904223u;
    lengths.tgt.push_back(1 + static_cast<int32_t>((state >> 16) % longest));
  }
}

// Two corpora of 10:1 target tokens: A (40,000 pairs, target lengths 1-60) and B (22,000 pairs,
// target lengths 1-10: a mean of 5.5 against A's 30.5, so token and pair shares differ).
struct TwoCorpora {
  Lengths lengths;
  std::vector<PairRange> ranges;
  std::vector<int64_t> tokens;
};

TwoCorpora two_corpora() {
  TwoCorpora c;
  add_lengths(c.lengths, 40000, 11, 60);
  add_lengths(c.lengths, 22000, 5, 10);
  c.ranges = {{0, 40000}, {40000, 22000}};
  for (const PairRange& range : c.ranges) {
    c.tokens.push_back(std::accumulate(c.lengths.tgt.begin() + range.first,
                                       c.lengths.tgt.begin() + range.end(), int64_t{0}));
  }
  return c;
}

// Each corpus's target tokens over every batch of the plan, counted sentence by sentence.
std::vector<double> token_shares(const BatchPlan& plan, const TwoCorpora& c) {
  std::vector<double> tokens(2, 0.0);
  for (const auto& batch : plan.batches()) {
    for (const int64_t i : batch) tokens[i < 40000 ? 0 : 1] += c.lengths.tgt[i];
  }
  const double all = tokens[0] + tokens[1];
  return {tokens[0] / all, tokens[1] / all};
}

BatchPlanOptions with_draws(const TwoCorpora& c, const std::vector<double>& shares) {
  BatchPlanOptions options;
  options.max_tokens = 600;
  options.seed = 9;
  options.directions = direction_draws(c.ranges, c.tokens, shares);
  return options;
}

TEST(Sampling, TheCorporasTokenSharesFollowTheTemperatureFormula) {
  const TwoCorpora c = two_corpora();
  const double ratio = static_cast<double>(c.tokens[0]) / static_cast<double>(c.tokens[1]);
  ASSERT_NEAR(ratio, 10.0, 0.5);  // 10:1 in target tokens
  // p_i = n_i^(1/T) / sum_j n_j^(1/T), T = 5, computed here from the token counts.
  const double a = std::pow(static_cast<double>(c.tokens[0]), 0.2);
  const double b = std::pow(static_cast<double>(c.tokens[1]), 0.2);
  const std::vector<double> want = {a / (a + b), b / (a + b)};
  const std::vector<double> shares = sampling_shares(c.tokens, 5.0);
  EXPECT_NEAR(shares[0], want[0], 1e-12);
  const BatchPlan plan =
      make_batch_plan(padded_lengths(c.lengths.src, c.lengths.tgt), with_draws(c, shares), 0);
  for (int64_t epoch : {0, 1}) {
    const BatchPlan again =
        make_batch_plan(padded_lengths(c.lengths.src, c.lengths.tgt), with_draws(c, shares), epoch);
    const std::vector<double> got = token_shares(again, c);
    EXPECT_NEAR(got[0], want[0], 0.01 * want[0]) << "epoch " << epoch;
    EXPECT_NEAR(got[1], want[1], 0.01 * want[1]) << "epoch " << epoch;
  }
  // An epoch holds about the split's target tokens, however they are shared.
  double tokens = 0;
  for (const auto& batch : plan.batches()) {
    for (const int64_t i : batch) tokens += c.lengths.tgt[i];
  }
  EXPECT_NEAR(tokens, static_cast<double>(c.tokens[0] + c.tokens[1]),
              0.01 * static_cast<double>(c.tokens[0] + c.tokens[1]));
}

TEST(Sampling, WeightsGivenByHandAreHonouredTheSameWay) {
  const TwoCorpora c = two_corpora();
  const std::vector<double> shares = sampling_shares(c.tokens, 1.0, {1.0, 3.0});
  EXPECT_DOUBLE_EQ(shares[0], 0.25);
  EXPECT_DOUBLE_EQ(shares[1], 0.75);
  const std::vector<double> got = token_shares(
      make_batch_plan(padded_lengths(c.lengths.src, c.lengths.tgt), with_draws(c, shares), 3), c);
  EXPECT_NEAR(got[0], 0.25, 0.01 * 0.25);
  EXPECT_NEAR(got[1], 0.75, 0.01 * 0.75);
}

TEST(Sampling, AnUpsampledCorpusRepeatsEveryPairAsEvenlyAsItCan) {
  const TwoCorpora c = two_corpora();
  const BatchPlanOptions options = with_draws(c, sampling_shares(c.tokens, 1.0, {1.0, 1.0}));
  const int64_t draws = options.directions[1].draws;
  ASSERT_GT(draws, 22000);  // B is upsampled, A downsampled
  ASSERT_LT(options.directions[0].draws, 40000);
  std::vector<int64_t> times(62000, 0);
  for (const auto& batch :
       make_batch_plan(padded_lengths(c.lengths.src, c.lengths.tgt), options, 0).batches()) {
    for (const int64_t i : batch) ++times[static_cast<size_t>(i)];
  }
  int64_t b_total = 0;
  for (int64_t i = 40000; i < 62000; ++i) {
    EXPECT_GE(times[static_cast<size_t>(i)], draws / 22000) << i;
    EXPECT_LE(times[static_cast<size_t>(i)], draws / 22000 + 1) << i;
    b_total += times[static_cast<size_t>(i)];
  }
  EXPECT_EQ(b_total, draws);
  int64_t a_total = 0;
  for (int64_t i = 0; i < 40000; ++i) {
    EXPECT_LE(times[static_cast<size_t>(i)], 1) << i;  // a subset, without repeats
    a_total += times[static_cast<size_t>(i)];
  }
  EXPECT_EQ(a_total, options.directions[0].draws);
}

TEST(Sampling, DrawingEachPairOnceIsThePlanWithoutCorpora) {
  const TwoCorpora c = two_corpora();
  const std::vector<uint16_t> padded = padded_lengths(c.lengths.src, c.lengths.tgt);
  BatchPlanOptions plain;
  plain.max_tokens = 600;
  plain.seed = 9;
  BatchPlanOptions once = plain;
  once.directions = {{{0, 40000}, 40000}, {{40000, 22000}, 22000}};
  EXPECT_EQ(make_batch_plan(padded, once, 2).batches(),
            make_batch_plan(padded, plain, 2).batches());
  // Temperature 1 is proportional: each pair once.
  const auto proportional = direction_draws(c.ranges, c.tokens, sampling_shares(c.tokens, 1.0));
  EXPECT_EQ(proportional[0].draws, 40000);
  EXPECT_EQ(proportional[1].draws, 22000);
}

TEST(Sampling, BadInputIsRefused) {
  EXPECT_THROW(sampling_shares({10, 1}, 0.0), std::invalid_argument);
  EXPECT_THROW(sampling_shares({10, 1}, -1.0), std::invalid_argument);
  EXPECT_THROW(sampling_shares({10, 1}, 1.0, {1.0, 0.0}), std::invalid_argument);
  EXPECT_THROW(sampling_shares({10, 1}, 1.0, {1.0}), std::invalid_argument);
  const std::vector<uint16_t> padded(30, 5);
  BatchPlanOptions gap;
  gap.directions = {{{0, 10}, 10}, {{11, 19}, 19}};
  EXPECT_THROW(make_batch_plan(padded, gap, 0), std::invalid_argument);
  BatchPlanOptions short_of = gap;
  short_of.directions = {{{0, 10}, 12}, {{10, 10}, 10}};
  EXPECT_THROW(make_batch_plan(padded, short_of, 0), std::invalid_argument);
}

// Two directions of a file as Corpus::directions() gives them: fw (3 pairs of 4 target tokens)
// then bw (2 pairs of 1).
Directions two_directions() {
  Direction fw{"fw", "de", "en", ">>en<<", {{"train", {0, 3}}}};
  Direction bw{"bw", "en", "de", ">>de<<", {{"train", {3, 2}}}};
  return Directions({fw, bw});
}

std::string error_of(const Directions& directions, const SamplingPolicy& policy) {
  try {
    epoch_draws(directions, {4, 4, 4, 1, 1}, policy, "c.h5");
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

TEST(Sampling, EpochDrawsFollowTheWeightsByDirectionName) {
  const Directions directions = two_directions();
  SamplingPolicy policy;
  EXPECT_TRUE(epoch_draws(directions, {4, 4, 4, 1, 1}, policy, "c.h5").empty());  // each once
  policy.weights = {{"bw", 1.0}, {"fw", 1.0}};  // named in another order than the file's
  const std::vector<DirectionDraws> draws =
      epoch_draws(directions, {4, 4, 4, 1, 1}, policy, "c.h5");
  ASSERT_EQ(draws.size(), 2u);
  // Equal shares of the 14 target tokens: 7 each, fw's pairs hold 4 (2 draws), bw's 1 (7 draws).
  EXPECT_EQ(draws[0].pairs.first, 0);
  EXPECT_EQ(draws[0].pairs.count, 3);
  EXPECT_EQ(draws[0].draws, 2);
  EXPECT_EQ(draws[1].pairs.first, 3);
  EXPECT_EQ(draws[1].draws, 7);
  EXPECT_EQ(describe_draws(draws, directions),
            "an epoch draws fw 2 of its 3 pairs, bw 7 of its 2 pairs");
}

TEST(Sampling, WeightsThatDoNotMatchTheDirectionsNameTheKeyAndTheFile) {
  SamplingPolicy policy;
  policy.weights = {{"fw", 1.0}, {"xx", 2.0}};
  EXPECT_EQ(error_of(two_directions(), policy),
            "data.weights: no corpus 'xx' in 'c.h5' (its corpora: fw, bw)");
  policy.weights = {{"fw", 1.0}};
  EXPECT_EQ(error_of(two_directions(), policy),
            "data.weights: corpus 'bw' has no weight (give one to each of fw, bw)");
  const Directions one({Direction{"", "", "", "", {{"train", {0, 5}}}}});
  EXPECT_EQ(error_of(one, policy),
            "data.weights: corpus 'c.h5' holds one corpus, not several (tandem-prep --corpora)");
}

TEST(Directions, FindNamesAndTags) {
  const Directions directions = two_directions();
  EXPECT_TRUE(directions.several());
  ASSERT_NE(directions.find("bw"), nullptr);
  EXPECT_EQ(directions.find("bw")->range("train")->end(), 5);
  EXPECT_EQ(directions.find("bw")->range("valid"), nullptr);
  EXPECT_EQ(directions.find("xx"), nullptr);
  EXPECT_EQ(directions.names(), (std::vector<std::string>{"fw", "bw"}));
  EXPECT_EQ(directions.listed(), "fw, bw");
  EXPECT_EQ(language_tag("es"), ">>es<<");
  const Directions one({Direction{}});
  EXPECT_FALSE(one.several());
  EXPECT_TRUE(one.names().empty());
  EXPECT_EQ(one.listed(), "one, unnamed");
}

}  // namespace
}  // namespace tandem::data
