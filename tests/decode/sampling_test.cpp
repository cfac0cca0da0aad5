// Tests of sampling (tandem-decode --sampling): parsing the option; a draw against hand-computed
// cumulative probabilities; the uniform stream; a sentence's draws depend on the seed and its
// index alone (not the batch, the order, the threads); the first token's frequencies over 20,000
// draws match the model's softmax computed by the full decoder (chi-square), whole and top-k at
// a temperature; and top-k and top-p never emit a token outside their cut.
#include "trainer/decode/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "tests/decode/fixtures.h"
#include "trainer/decode/beam.h"
#include "trainer/decode/translate.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

TEST(Sampling, ParsesTheThreeKindsAndRefusesTheRestNamingTheText) {
  EXPECT_EQ(parse_sampling("topk:40").kind, SamplingKind::kTopK);
  EXPECT_EQ(parse_sampling("topk:40").k, 40);
  EXPECT_EQ(parse_sampling("topp:0.9").kind, SamplingKind::kTopP);
  EXPECT_DOUBLE_EQ(parse_sampling("topp:0.9").p, 0.9);
  EXPECT_EQ(parse_sampling("full").kind, SamplingKind::kFull);
  SamplingOptions base;
  base.temperature = 0.5;
  base.seed = 9;
  EXPECT_EQ(parse_sampling("full", base).seed, 9u);
  EXPECT_DOUBLE_EQ(parse_sampling("topk:2", base).temperature, 0.5);
  for (const char* bad : {"topk:0", "topk:-3", "topk:x", "topk:", "topk:2.5", "topp:0", "topp:1.5",
                          "topp:", "topp:nan", "beam", "", "full:3"}) {
    try {
      parse_sampling(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("--sampling '") + bad + "'"),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(Sampling, ADrawIsTheFirstTokenWhoseCumulativeProbabilityPassesTheUniform) {
  // Probabilities 0.2, 0.5, 0.3 and one token never to draw.
  const double never = -std::numeric_limits<double>::infinity();
  const auto row =
      torch::tensor({std::log(0.2), std::log(0.5), std::log(0.3), never}, torch::kDouble)
          .unsqueeze(0);
  auto one = [&](const SamplingOptions& o, double u) { return draw_tokens(row, o, {u})[0]; };
  SamplingOptions full;
  full.kind = SamplingKind::kFull;  // in id order: 0.2 | 0.7 | 1.0
  EXPECT_EQ(one(full, 0.0), 0);
  EXPECT_EQ(one(full, 0.19), 0);
  EXPECT_EQ(one(full, 0.21), 1);
  EXPECT_EQ(one(full, 0.69), 1);
  EXPECT_EQ(one(full, 0.71), 2);
  EXPECT_EQ(one(full, 0.999999), 2);
  SamplingOptions topk = full;
  topk.kind = SamplingKind::kTopK;
  topk.k = 2;  // 0.5 and 0.3, in that order: 0.625 | 1.0
  EXPECT_EQ(one(topk, 0.6), 1);
  EXPECT_EQ(one(topk, 0.63), 2);
  topk.k = 1;
  EXPECT_EQ(one(topk, 0.99), 1);
  SamplingOptions topp = full;
  topp.kind = SamplingKind::kTopP;
  topp.p = 0.6;  // 0.5 is short of it: 0.5 and 0.3 are kept
  EXPECT_EQ(one(topp, 0.62), 1);
  EXPECT_EQ(one(topp, 0.63), 2);
  topp.p = 0.5;  // 0.5 reaches it alone
  EXPECT_EQ(one(topp, 0.99), 1);
  // Temperature 0.5 squares the probabilities: 0.04, 0.25, 0.09 of 0.38 → cut at 0.105 and 0.763.
  SamplingOptions cold = full;
  cold.temperature = 0.5;
  EXPECT_EQ(one(cold, 0.10), 0);
  EXPECT_EQ(one(cold, 0.11), 1);
  EXPECT_EQ(one(cold, 0.76), 1);
  EXPECT_EQ(one(cold, 0.77), 2);
  // Ties go to the lower id for top-k.
  const auto tied = torch::tensor({-1.0, -0.5, -0.5}, torch::kDouble).unsqueeze(0);
  topk.k = 1;
  EXPECT_EQ(draw_tokens(tied, topk, {0.9})[0], 1);
  EXPECT_THROW(draw_tokens(torch::full({1, 3}, -INFINITY, torch::kDouble), full, {0.5}),
               std::invalid_argument);
}

TEST(Sampling, TheUniformStreamIsAFunctionOfSeedStreamAndStepAndLooksUniform) {
  EXPECT_EQ(sampling_uniform(1, 2, 3), sampling_uniform(1, 2, 3));
  EXPECT_NE(sampling_uniform(1, 2, 3), sampling_uniform(2, 2, 3));
  EXPECT_NE(sampling_uniform(1, 2, 3), sampling_uniform(1, 3, 3));
  EXPECT_NE(sampling_uniform(1, 2, 3), sampling_uniform(1, 2, 4));
  std::vector<int> buckets(10, 0);
  double sum = 0;
  for (int64_t i = 0; i < 100000; ++i) {
    const double u = sampling_uniform(7, i, 1);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++buckets[static_cast<size_t>(u * 10)];
  }
  EXPECT_NEAR(sum / 100000, 0.5, 0.005);
  for (const int count : buckets) EXPECT_NEAR(count, 10000, 450);
}

DecodeOptions sampling_options(SamplingKind kind, uint64_t seed) {
  DecodeOptions options;
  options.beam_size = 1;
  options.max_len_a = 1.0;
  options.max_len_b = 3;
  options.min_len = 0;
  options.sampling.kind = kind;
  options.sampling.k = 5;
  options.sampling.p = 0.8;
  options.sampling.seed = seed;
  return options;
}

// A sentence's sample depends on the seed and its index alone: the whole batch, each sentence
// alone at its index, and two threads give the same tokens; another seed gives others.
TEST(Sampling, ASentencesDrawsDependOnTheSeedAndItsIndexAlone) {
  auto model = tiny_model(0.5);
  torch::manual_seed(5);
  const auto sentences = random_sentences({3, 7, 1, 5, 9, 4, 6, 2});
  for (const auto kind : {SamplingKind::kTopK, SamplingKind::kTopP, SamplingKind::kFull}) {
    auto options = sampling_options(kind, 11);
    const auto whole = translate(model, sentences, options);
    options.threads = 2;
    options.batch_tokens = 16;  // several batches
    const auto threaded = translate(model, sentences, options);
    for (size_t i = 0; i < sentences.size(); ++i) {
      RowInput row;
      row.stream = static_cast<int64_t>(i);
      const auto alone = translate(model, {sentences[i]}, options, {row});
      EXPECT_EQ(alone[0].tokens, whole[i].tokens) << "sentence " << i;
      EXPECT_EQ(threaded[i].tokens, whole[i].tokens) << "sentence " << i;
      // The same draws; the scores within the float rounding of another batch's padding.
      EXPECT_NEAR(alone[0].score, whole[i].score, 1e-4) << "sentence " << i;
    }
    options.sampling.seed = 12;
    const auto other = translate(model, sentences, options);
    int differ = 0;
    for (size_t i = 0; i < sentences.size(); ++i) differ += other[i].tokens != whole[i].tokens;
    EXPECT_GT(differ, 0);
  }
}

// The chi-square statistic's value that a chi-square variable of `df` degrees of freedom exceeds
// with probability 0.01 (Wilson and Hilferty's approximation, close for df >= 5).
double chi_square_99(int df) {
  const double z = 2.326347874;  // the normal's 99th percentile
  const double a = 2.0 / (9.0 * df);
  return df * std::pow(1.0 - a + z * std::sqrt(a), 3.0);
}

// Over `draws` first tokens of one sentence, each from its own stream, the counts against
// `expected` probabilities (computed by the caller): the chi-square statistic is below its 99th
// percentile (p > 0.01), tokens whose expected count is under 5 pooled.
void expect_first_tokens_follow(model::Transformer& model, const std::vector<int32_t>& sentence,
                                const DecodeOptions& options, const std::vector<double>& expected,
                                int64_t draws) {
  DecodeOptions one_step = options;
  one_step.max_len_a = 0;
  one_step.max_len_b = 1;
  one_step.batch_tokens = 1 << 30;
  const std::vector<std::vector<int32_t>> copies(draws, sentence);
  std::vector<int64_t> counts(expected.size(), 0);
  for (const auto& h : translate(model, copies, one_step)) {
    ++counts[h.ended ? kEosId : h.tokens.at(0)];
  }
  double chi2 = 0, pooled_expected = 0, pooled_count = 0;
  int bins = 0;
  for (size_t token = 0; token < expected.size(); ++token) {
    const double e = expected[token] * static_cast<double>(draws);
    if (expected[token] == 0.0) {
      EXPECT_EQ(counts[token], 0) << "token " << token << " has probability 0";
      continue;
    }
    if (e < 5) {
      pooled_expected += e;
      pooled_count += static_cast<double>(counts[token]);
      continue;
    }
    chi2 += (counts[token] - e) * (counts[token] - e) / e;
    ++bins;
  }
  if (pooled_expected > 0) {
    chi2 += (pooled_count - pooled_expected) * (pooled_count - pooled_expected) / pooled_expected;
    ++bins;
  }
  ASSERT_GE(bins, 6);
  std::printf("chi-square %.2f over %d bins (99th percentile %.2f)\n", chi2, bins,
              chi_square_99(bins - 1));
  EXPECT_LT(chi2, chi_square_99(bins - 1));
}

// The model's probabilities of the first target token, by the full decoder, with <pad> and <s>
// out, at `temperature`, cut to the `k` likeliest (0: none), renormalised.
std::vector<double> first_token_probabilities(model::Transformer& model,
                                              const std::vector<int32_t>& sentence,
                                              double temperature, int64_t k) {
  torch::NoGradGuard no_grad;
  const auto logp = next_logp(model, source_row(sentence), {});
  std::vector<std::pair<double, int64_t>> ranked;
  for (int64_t token = 0; token < logp.size(0); ++token) {
    if (token == kPadId || token == kBosId) continue;
    ranked.emplace_back(logp[token].item<double>(), token);
  }
  std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  });
  if (k > 0) ranked.resize(static_cast<size_t>(k));
  std::vector<double> p(static_cast<size_t>(logp.size(0)), 0.0);
  double total = 0;
  for (const auto& [lp, token] : ranked) total += p[token] = std::exp(lp / temperature);
  for (double& x : p) x /= total;
  return p;
}

TEST(Sampling, FirstTokensOverTwentyThousandDrawsFollowTheModelsSoftmax) {
  auto model = tiny_model(0.0);
  torch::manual_seed(8);
  const auto sentence = random_sentence(5);
  auto options = sampling_options(SamplingKind::kFull, 21);
  expect_first_tokens_follow(model, sentence, options,
                             first_token_probabilities(model, sentence, 1.0, 0), 20000);
  options = sampling_options(SamplingKind::kTopK, 22);
  options.sampling.k = 6;
  options.sampling.temperature = 0.7;
  expect_first_tokens_follow(model, sentence, options,
                             first_token_probabilities(model, sentence, 0.7, 6), 20000);
}

// Every token of every sample is among the k likeliest (top-k), or inside the nucleus (top-p), of
// the full decoder's distribution after its prefix.
TEST(Sampling, TopKAndTopPNeverEmitATokenOutsideTheirCut) {
  auto model = tiny_model(0.0);
  torch::manual_seed(9);
  const auto sentence = random_sentence(4);
  const auto src = source_row(sentence);
  torch::NoGradGuard no_grad;
  for (const auto kind : {SamplingKind::kTopK, SamplingKind::kTopP}) {
    auto options = sampling_options(kind, 31);
    options.sampling.k = 3;
    options.sampling.p = 0.5;
    const std::vector<std::vector<int32_t>> copies(150, sentence);
    int64_t tokens = 0;
    for (const auto& h : translate(model, copies, options)) {
      std::vector<int32_t> prefix;
      auto emitted = h.tokens;
      if (h.ended) emitted.push_back(static_cast<int32_t>(kEosId));
      for (const int32_t token : emitted) {
        const auto logp = next_logp(model, src, prefix);
        std::vector<std::pair<double, int64_t>> ranked;
        for (int64_t t = 0; t < logp.size(0); ++t) {
          if (t != kPadId && t != kBosId) ranked.emplace_back(logp[t].item<double>(), t);
        }
        std::sort(ranked.begin(), ranked.end(), std::greater<>());
        std::set<int64_t> allowed;
        double mass = 0, total = 0;
        for (const auto& [lp, t] : ranked) total += std::exp(lp);
        for (const auto& [lp, t] : ranked) {
          if (kind == SamplingKind::kTopK ? allowed.size() >= 3 : mass >= 0.5 * total) break;
          allowed.insert(t);
          mass += std::exp(lp);
        }
        EXPECT_TRUE(allowed.count(token)) << "token " << token << " after " << prefix.size();
        prefix.push_back(token);
        ++tokens;
      }
    }
    EXPECT_GT(tokens, 300);
  }
}

TEST(Sampling, OnlyAtBeamOneAndWithATemperatureAboveZero) {
  auto model = tiny_model(0.0);
  const auto sentences = random_sentences({3});
  auto options = sampling_options(SamplingKind::kTopK, 1);
  options.beam_size = 4;
  EXPECT_THROW(translate(model, sentences, options), std::invalid_argument);
  options.beam_size = 1;
  options.sampling.temperature = 0;
  EXPECT_THROW(translate(model, sentences, options), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::decode
