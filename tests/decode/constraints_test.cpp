// Tests of lexical constraints: a hypothesis' standing advances, starts over and owes as
// documented; the beam's slots are shared among banks as documented; and beam search with
// constraints returns, at beams 1, 4 and 8, with n-best lists, ensembles, a forced first token and
// int8, only hypotheses that contain every include phrase and no avoid phrase, each scored as the
// full decoder scores its tokens, while the rows of the batch without constraints decode exactly
// as they do without any.
#include "trainer/decode/constraints.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/decode/fixtures.h"
#include "trainer/decode/beam.h"
#include "trainer/decode/constrained_step.h"
#include "trainer/decode/translate.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

TEST(ConstraintState, MeetsAPhraseTokenByTokenAndStartsOverWhenLeft) {
  Constraints c;
  c.include = {{5, 6, 7}, {9}};
  ConstraintState s;
  EXPECT_EQ(needed_tokens(c, s), (std::vector<int32_t>{5, 9}));
  EXPECT_EQ(owed_tokens(c, s), 4);
  s = state_after(c, s, 5);
  EXPECT_EQ(s.phrase, 0);
  EXPECT_EQ(s.progress, 1);
  EXPECT_EQ(needed_tokens(c, s), (std::vector<int32_t>{6}));
  s = state_after(c, s, 8);  // left: starts over
  EXPECT_EQ(s.phrase, -1);
  EXPECT_EQ(s.progress, 0);
  s = state_after(c, s, 5);
  s = state_after(c, s, 5);  // leaves phrase 0 and starts it again at once
  EXPECT_EQ(s.phrase, 0);
  EXPECT_EQ(s.matched, 1);
  s = state_after(c, s, 6);
  s = state_after(c, s, 7);
  EXPECT_EQ(s.met, 1U);
  EXPECT_EQ(s.progress, 3);
  EXPECT_EQ(needed_tokens(c, s), (std::vector<int32_t>{9}));
  s = state_after(c, s, 9);
  EXPECT_EQ(s.met, 3U);
  EXPECT_EQ(owed_tokens(c, s), 0);
  EXPECT_TRUE(needed_tokens(c, s).empty());
}

TEST(ConstraintState, AvoidPhrasesBanTheTokenThatWouldCompleteThem) {
  Constraints c;
  c.avoid = {{4}, {5, 6}, {7, 5, 6}};
  EXPECT_EQ(banned_tokens(c, {}), (std::vector<int32_t>{4}));
  EXPECT_EQ(banned_tokens(c, {9, 5}), (std::vector<int32_t>{4, 6}));
  EXPECT_EQ(banned_tokens(c, {7, 5}), (std::vector<int32_t>{4, 6}));
  EXPECT_EQ(banned_tokens(c, {5, 9}), (std::vector<int32_t>{4}));
}

TEST(AllocateSlots, SharesTheBeamAmongBanksAndPassesUnusedSlotsDown) {
  // 8 slots over 3 banks: 2 each, the remainder 2 to the two highest.
  EXPECT_EQ(allocate_slots({10, 10, 10}, 8), (std::vector<int64_t>{2, 3, 3}));
  // The top bank is empty: its slots pass to the one below.
  EXPECT_EQ(allocate_slots({10, 10, 0}, 8), (std::vector<int64_t>{2, 6, 0}));
  // Beam 1 goes to the highest bank with a candidate.
  EXPECT_EQ(allocate_slots({5, 1, 0, 0}, 1), (std::vector<int64_t>{0, 1, 0, 0}));
  // Too few candidates below: what the lowest cannot use goes back up.
  EXPECT_EQ(allocate_slots({1, 0, 6}, 6), (std::vector<int64_t>{1, 0, 5}));
  EXPECT_EQ(allocate_slots({1, 1, 1}, 6), (std::vector<int64_t>{1, 1, 1}));
}

// The full decoder's score of `tokens` (then EOS when `ended`) after `first` forced tokens.
double forced_score(const Ensemble& ensemble, const std::vector<int32_t>& sentence,
                    const Hypothesis& h, size_t first) {
  torch::NoGradGuard no_grad;
  const auto src = source_row(sentence);
  double score = 0;
  std::vector<int32_t> prefix(h.tokens.begin(), h.tokens.begin() + static_cast<int64_t>(first));
  for (size_t t = first; t <= h.tokens.size(); ++t) {
    if (t == h.tokens.size() && !h.ended) break;
    const int64_t token = t < h.tokens.size() ? h.tokens[t] : kEosId;
    score += ensemble_next_logp(ensemble, src, prefix)[token].item<double>();
    if (t < h.tokens.size()) prefix.push_back(h.tokens[t]);
  }
  return score;
}

// 12 sentences; rows 3, 7 and 11 without constraints, the others with one or two phrases to
// include (words of the sentence, or any words) and one or two to avoid.
std::vector<Constraints> some_constraints(const std::vector<std::vector<int32_t>>& sentences) {
  std::vector<Constraints> out(sentences.size());
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (i % 4 == 3) continue;
    const auto& s = sentences[i];
    out[i].include.push_back({s[1], s[0]});  // in the order a reversal writes them
    if (i % 2 == 0) out[i].include.push_back({static_cast<int32_t>(kFirstWord + i)});
    std::vector<std::vector<int32_t>> avoid = {{s.back()}};  // a reversal's first word
    if (i % 3 == 0) avoid.push_back({s[2], static_cast<int32_t>(kVocab - 1)});
    for (const auto& phrase : avoid) {  // not one an include phrase holds
      bool held = false;
      for (const auto& include : out[i].include) held = held || contains_phrase(include, phrase);
      if (!held) out[i].avoid.push_back(phrase);
    }
  }
  return out;
}

void expect_constraints_hold(const Ensemble& ensemble, const DecodeOptions& options,
                             const std::vector<int32_t>& first_tokens) {
  torch::manual_seed(3);
  auto sentences = random_sentences({5, 3, 7, 4, 8, 2, 6, 5, 3, 7, 4, 6});
  sentences[5].push_back(kFirstWord);  // at least 3 words each
  const auto constraints = some_constraints(sentences);
  const auto src = source_batch(sentences);
  const auto got = beam_search(ensemble, src, options, row_inputs(first_tokens, constraints));
  const auto free = beam_search(ensemble, src, options, first_token_rows(first_tokens));
  const size_t first = first_tokens.empty() ? 0 : 1;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const auto what = "beam " + std::to_string(options.beam_size) + ", sentence " +
                      std::to_string(i);
    ASSERT_EQ(got[i].size(), static_cast<size_t>(options.nbest)) << what;
    for (const auto& h : got[i]) {
      // The forced first token is given, not chosen: the phrases hold after it.
      const std::vector<int32_t> chosen(h.tokens.begin() + static_cast<int64_t>(first),
                                        h.tokens.end());
      for (const auto& phrase : constraints[i].include) {
        EXPECT_TRUE(contains_phrase(chosen, phrase)) << what;
      }
      for (const auto& phrase : constraints[i].avoid) {
        EXPECT_FALSE(contains_phrase(chosen, phrase)) << what;
      }
      EXPECT_NEAR(h.score, forced_score(ensemble, sentences[i], h, first), 1e-4) << what;
    }
    if (!constraints[i].empty()) continue;
    // Untouched by its neighbours' constraints (up to the rounding of a decoder step whose
    // rows differ: the other sentences' hypotheses are other ones).
    for (size_t n = 0; n < got[i].size(); ++n) {
      EXPECT_EQ(got[i][n].tokens, free[i][n].tokens) << what;
      EXPECT_NEAR(got[i][n].score, free[i][n].score, 1e-5) << what;
    }
  }
}

TEST(ConstrainedSearch, EveryHypothesisHoldsItsPhrasesAtBeams1And4And8) {
  for (const int64_t beam : {1, 4, 8}) {
    DecodeOptions options;
    options.beam_size = beam;
    options.nbest = beam == 1 ? 1 : 2;
    expect_constraints_hold(trained_model(), options, {});
  }
}

TEST(ConstrainedSearch, HoldsWithAForcedFirstTokenAnEnsembleAndInt8) {
  DecodeOptions options;
  options.beam_size = 4;
  expect_constraints_hold(trained_model(), options, std::vector<int32_t>(12, kFirstWord + 1));
  Ensemble two({trained_model(), tiny_model(0.0)}, {0.7, 0.3});
  expect_constraints_hold(two, options, {});
  auto int8 = frozen_copy(trained_model(), kernels::InferencePrecision::kInt8);
  expect_constraints_hold(int8, options, {});
}

TEST(ConstrainedSearch, ThroughTranslateInAnyBatchingTheSameTranslations) {
  torch::manual_seed(9);
  const auto sentences = random_sentences({5, 3, 7, 4, 8, 3, 6, 5, 3, 7, 4, 6});
  const auto constraints = some_constraints(sentences);
  DecodeOptions options;
  const auto whole = translate(trained_model(), sentences, options, row_inputs({}, constraints));
  options.batch_tokens = 8;  // one or two sentences a batch
  options.threads = 2;
  const auto small = translate(trained_model(), sentences, options, row_inputs({}, constraints));
  for (size_t i = 0; i < sentences.size(); ++i) {
    EXPECT_EQ(whole[i].tokens, small[i].tokens) << "sentence " << i;
    for (const auto& phrase : constraints[i].include) {
      EXPECT_TRUE(contains_phrase(whole[i].tokens, phrase)) << "sentence " << i;
    }
  }
}

TEST(ConstrainedSearch, RefusesWhatCannotHold) {
  const auto src = source_batch({{5, 6, 7}});
  DecodeOptions options;
  Constraints contradiction;
  contradiction.include = {{5, 6, 7}};
  contradiction.avoid = {{6}};
  EXPECT_THROW(beam_search(trained_model(), src, options, row_inputs({}, {contradiction})),
               std::invalid_argument);
  Constraints special;
  special.include = {{static_cast<int32_t>(kEosId)}};
  EXPECT_THROW(beam_search(trained_model(), src, options, row_inputs({}, {special})),
               std::invalid_argument);
  Constraints too_long;
  too_long.include = {std::vector<int32_t>(64, 5)};
  EXPECT_THROW(beam_search(trained_model(), src, options, row_inputs({}, {too_long})),
               std::invalid_argument);
  Constraints fine;
  fine.include = {{5}};
  options.beam_size = 1;
  options.sampling.kind = SamplingKind::kFull;
  EXPECT_THROW(beam_search(trained_model(), src, options, row_inputs({}, {fine})),
               std::invalid_argument);
}

}  // namespace
}  // namespace tandem::decode
