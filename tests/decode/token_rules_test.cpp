// Each token rule alone (what it bans, and when), the rules in order, and the two ways bans are
// applied: to rows' best tokens (a loop on contiguous CPU tensors, tensor ops otherwise: the same
// entries), and to a whole distribution's columns, a shortlist's included.
#include "trainer/decode/token_rules.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "trainer/common/token_ids.h"

namespace tandem::decode {
namespace {

// Two sentences of two hypotheses each: rows 0-1 sentence 0, rows 2-3 sentence 1.
Beams two_sentences() {
  Beams beams;
  beams.sentence = {0, 1};
  beams.width = 2;
  beams.tokens = {{5, 6}, {5, 7}, {8}, {9, 6}};
  beams.scores = {0, 0, 0, 0};
  return beams;
}

StepBans bans_of(const TokenRule& rule, int64_t step, const Beams& beams) {
  StepBans bans;
  rule.ban(StepView{step, beams}, bans);
  return bans;
}

TEST(TokenRules, NeverEmittedBansPadAndBosInEveryRowAtEveryStep) {
  const Beams beams = two_sentences();
  for (const int64_t step : {1, 2, 50}) {
    const StepBans bans = bans_of(NeverEmitted(), step, beams);
    EXPECT_EQ(bans.everywhere, (std::vector<int64_t>{kPadId, kBosId}));
    EXPECT_TRUE(bans.per_row.empty());
    EXPECT_TRUE(bans.bans(3, kBosId));
    EXPECT_FALSE(bans.bans(3, kEosId));
  }
}

TEST(TokenRules, MinimumLengthBansEosUntilAHypothesisHoldsThatManyTokens) {
  const Beams beams = two_sentences();
  const MinimumLength rule(2);
  EXPECT_TRUE(bans_of(rule, 1, beams).bans_everywhere(kEosId));
  EXPECT_TRUE(bans_of(rule, 2, beams).bans_everywhere(kEosId));  // EOS would be the 2nd token
  EXPECT_FALSE(bans_of(rule, 3, beams).bans_everywhere(kEosId));
  EXPECT_TRUE(bans_of(MinimumLength(0), 1, beams).everywhere.empty());
}

TEST(TokenRules, AvoidPhrasesBansTheTokenThatWouldCompleteOneInItsRowsAlone) {
  const Beams beams = two_sentences();
  std::vector<Constraints> constraints(2);
  constraints[0].avoid = {{6, 11}, {7}};  // sentence 0: "6 11" and "7"
  const StepBans bans = bans_of(AvoidPhrases(constraints), 3, beams);
  ASSERT_EQ(bans.per_row.size(), 4u);
  EXPECT_EQ(bans.per_row[0], (std::vector<int32_t>{11, 7}));  // after "5 6"
  EXPECT_EQ(bans.per_row[1], (std::vector<int32_t>{7}));      // after "5 7"
  EXPECT_TRUE(bans.per_row[3].empty()) << "sentence 1 avoids nothing, though its row ends in 6";
  EXPECT_EQ(bans.most(), 2);
  EXPECT_TRUE(bans.bans(0, 11));
  EXPECT_FALSE(bans.bans(1, 11));
}

TEST(TokenRules, ASearchsRulesApplyInOrderAndAddUp) {
  const Beams beams = two_sentences();
  std::vector<Constraints> constraints(2);
  constraints[1].avoid = {{6, 12}};
  const TokenRules free = token_rules(1, constraints, /*constrained=*/false);
  EXPECT_EQ(free.size(), 2u);
  StepBans first;
  step_bans(free, StepView{1, beams}, first);
  EXPECT_EQ(first.everywhere, (std::vector<int64_t>{kPadId, kBosId, kEosId}));
  EXPECT_EQ(first.most(), 3);
  const TokenRules rules = token_rules(1, constraints, /*constrained=*/true);
  StepBans later = first;  // cleared, then filled afresh
  step_bans(rules, StepView{2, beams}, later);
  EXPECT_EQ(later.everywhere, (std::vector<int64_t>{kPadId, kBosId}));
  EXPECT_EQ(later.per_row[3], (std::vector<int32_t>{12}));
  EXPECT_EQ(later.most(), 3);
}

// Rows' best tokens with some banned ones among them, banned by the loop (contiguous float on the
// CPU) and by tensor ops (a transposed copy, not contiguous): the same entries become -inf.
TEST(TokenRules, BanningRowsBestTokensMarksTheSameEntriesEitherWay) {
  StepBans bans;
  bans.everywhere = {kPadId, kBosId};
  bans.per_row = {{9}, {}, {4}};
  const auto tokens = torch::tensor({0, 9, 5, 2, 9, 6, 4, 5, 3}, torch::kLong).view({3, 3});
  const auto logp =
      torch::tensor({-1.f, -2.f, -3.f, -1.f, -2.f, -3.f, -1.f, -2.f, -3.f}).view({3, 3});
  auto looped = logp.clone();
  ban_tokens(bans, looped, tokens);
  auto strided = logp.t().contiguous().t();  // the same values, column-major
  ban_tokens(bans, strided, tokens.t().contiguous().t());
  const auto want = torch::tensor({1, 1, 0, 1, 0, 0, 1, 0, 0}, torch::kBool).view({3, 3});
  EXPECT_TRUE(torch::equal(looped.isinf(), want)) << looped;
  EXPECT_TRUE(torch::equal(strided.isinf(), want)) << strided;
  EXPECT_TRUE(torch::equal(looped.masked_fill(want, 0), logp.masked_fill(want, 0)));
}

TEST(TokenRules, BanningColumnsFollowsAShortlistsColumnsAndSkipsWhatItLeavesOut) {
  StepBans bans;
  bans.everywhere = {kPadId, kBosId, kEosId};
  bans.per_row = {{}, {12}};
  OutputColumns columns;  // a shortlist's: ids 3, 7, 12 (no <pad>, no <s>)
  columns.cpu_ids = {3, 7, 12};
  columns.ids = torch::tensor(columns.cpu_ids, torch::kLong);
  auto log_probs = torch::zeros({2, 3}, torch::kDouble);
  ban_columns(bans, columns, log_probs);
  const auto want = torch::tensor({1, 0, 0, 1, 0, 1}, torch::kBool).view({2, 3});
  EXPECT_TRUE(torch::equal(log_probs.isinf(), want)) << log_probs;
  auto whole = torch::zeros({1, 6}, torch::kDouble);  // no shortlist: column i is id i
  ban_columns(StepBans{{kPadId, kBosId}, {}}, OutputColumns{}, whole);
  EXPECT_TRUE(std::isinf(whole[0][kPadId].item<double>()));
  EXPECT_TRUE(std::isinf(whole[0][kBosId].item<double>()));
  EXPECT_EQ(whole.isinf().sum().item<int64_t>(), 2);
}

}  // namespace
}  // namespace tandem::decode
