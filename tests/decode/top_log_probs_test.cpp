// The fused per-row candidates against LibTorch's log_softmax + topk, for one model and for an
// ensemble's weighted sum of log-probabilities.
#include "trainer/decode/top_log_probs.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace tandem::decode {
namespace {

// Expects (values, tokens) to be log_softmax(logits).topk(k): the same tokens, values within
// float rounding of the normaliser.
void expect_matches_reference(const torch::Tensor& logits, int64_t k) {
  auto [value, token] = top_log_probs(logits, k);
  auto [want_value, want_token] = torch::log_softmax(logits.to(torch::kDouble), -1).topk(k, -1);
  ASSERT_EQ(value.sizes(), want_value.sizes());
  EXPECT_TRUE(torch::equal(token, want_token));
  EXPECT_TRUE(torch::allclose(value.to(torch::kDouble), want_value, /*rtol=*/1e-5, /*atol=*/1e-5))
      << (value.to(torch::kDouble) - want_value).abs().max().item<double>();
}

TEST(TopLogProbs, EqualsLogSoftmaxThenTopk) {
  torch::manual_seed(7);
  // Widths around the 64-entry blocks, the vocabulary sizes of the presets, and k from 1 to 16.
  for (const int64_t vocab : {1, 5, 63, 64, 65, 200, 8000}) {
    for (const int64_t k : {1, 2, 8, 16}) {
      if (k > vocab) continue;
      SCOPED_TRACE("vocab " + std::to_string(vocab) + ", k " + std::to_string(k));
      expect_matches_reference(torch::randn({37, vocab}) * 4, k);
    }
  }
}

TEST(TopLogProbs, LargeLogitsDoNotOverflow) {
  auto logits = torch::randn({4, 300}) + 1e4;  // exp(x) alone would be inf
  expect_matches_reference(logits, 8);
}

TEST(TopLogProbs, TiesGoToTheLowerToken) {
  auto logits = torch::zeros({2, 100});
  logits[0][40] = 3;
  logits[0][10] = 3;
  logits[0][70] = 3;
  logits[1][99] = 1;
  auto [value, token] = top_log_probs(logits, 4);
  EXPECT_EQ(token[0][0].item<int64_t>(), 10);
  EXPECT_EQ(token[0][1].item<int64_t>(), 40);
  EXPECT_EQ(token[0][2].item<int64_t>(), 70);
  EXPECT_EQ(token[0][3].item<int64_t>(), 0);  // the first of the zeros
  EXPECT_EQ(token[1][0].item<int64_t>(), 99);
  EXPECT_EQ(token[1][1].item<int64_t>(), 0);
  // log_softmax of the row by hand: three entries e^3, 97 entries e^0.
  const double normaliser = std::log(3 * std::exp(3.0) + 97);
  EXPECT_NEAR(value[0][0].item<float>(), 3 - normaliser, 1e-5);
  EXPECT_NEAR(value[0][3].item<float>(), -normaliser, 1e-5);
}

TEST(TopLogProbs, OtherLayoutsAndTypesTakeTheTensorPath) {
  torch::manual_seed(3);
  expect_matches_reference(torch::randn({50, 9}).t(), 3);  // not contiguous: [9, 50]
  expect_matches_reference(torch::randn({6, 120}, torch::kDouble), 5);
}

TEST(TopLogProbs, RejectsABadK) {
  EXPECT_THROW(top_log_probs(torch::zeros({2, 5}), 6), std::invalid_argument);
  EXPECT_THROW(top_log_probs(torch::zeros({2, 5}), 0), std::invalid_argument);
  EXPECT_THROW(top_log_probs(torch::zeros({5}), 1), std::invalid_argument);
}

TEST(TopLogProbs, NonFiniteLogitsAreNamed) {
  auto logits = torch::zeros({3, 70});
  logits[1][5] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(
      {
        try {
          top_log_probs(logits, 2);
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("row 1"), std::string::npos) << e.what();
          throw;
        }
      },
      std::runtime_error);
}

TEST(TopLogProbs, AnEnsembleRanksByTheWeightedSumOfItsLogProbabilities) {
  torch::manual_seed(12);
  for (const int64_t vocab : {5, 65, 8000}) {
    SCOPED_TRACE("vocab " + std::to_string(vocab));
    const std::vector<torch::Tensor> logits = {
        torch::randn({9, vocab}) * 3, torch::randn({9, vocab}) * 3, torch::randn({9, vocab}) * 3};
    const std::vector<double> weights = {0.5, 0.3, 0.2};
    auto want = torch::zeros({9, vocab}, torch::kDouble);
    for (size_t i = 0; i < logits.size(); ++i) {
      want += torch::log_softmax(logits[i].to(torch::kDouble), -1) * weights[i];
    }
    auto [want_value, want_token] = want.topk(std::min<int64_t>(vocab, 4), -1);
    for (const bool contiguous : {true, false}) {  // the fused loop and the tensor path
      std::vector<torch::Tensor> given;
      for (const auto& one : logits) {
        given.push_back(contiguous ? one : one.t().contiguous().t());
      }
      auto [value, token] = top_log_probs(given, weights, std::min<int64_t>(vocab, 4));
      EXPECT_TRUE(torch::equal(token, want_token)) << "contiguous " << contiguous;
      EXPECT_TRUE(torch::allclose(value.to(torch::kDouble), want_value, 1e-5, 1e-5))
          << (value.to(torch::kDouble) - want_value).abs().max().item<double>();
    }
  }
}

TEST(TopLogProbs, AnEnsembleOfOneModelTwiceIsThatModelBitForBit) {
  torch::manual_seed(13);
  const auto logits = torch::randn({37, 8000}) * 4;
  auto [alone_value, alone_token] = top_log_probs(logits, 8);
  auto [both_value, both_token] = top_log_probs({logits, logits}, {0.5, 0.5}, 8);
  EXPECT_TRUE(torch::equal(both_token, alone_token));
  EXPECT_TRUE(torch::equal(both_value, alone_value));
}

TEST(TopLogProbs, AnEnsembleNeedsOneWeightPerModelAndOneShape) {
  const auto a = torch::zeros({2, 5}), b = torch::zeros({2, 6});
  EXPECT_THROW(top_log_probs({a, a}, {1.0}, 2), std::invalid_argument);
  EXPECT_THROW(top_log_probs({a, b}, {0.5, 0.5}, 2), std::invalid_argument);
}

// log_probs_at gives an entry the value top_log_probs gives it, bit for bit, for one model and an
// ensemble, on the fused path and the tensor path; and log_softmax's value for any other entry.
TEST(LogProbsAt, GivesEachEntryTheValueTopLogProbsGivesIt) {
  torch::manual_seed(11);
  const auto a = torch::randn({6, 300}) * 3, b = torch::randn({6, 300}) * 3;
  for (const bool fused : {true, false}) {
    for (const bool ensemble : {false, true}) {
      SCOPED_TRACE(std::string(fused ? "fused" : "tensor path") + (ensemble ? ", ensemble" : ""));
      std::vector<torch::Tensor> logits = {fused ? a : a.to(torch::kDouble)};
      std::vector<double> weights = {1.0};
      if (ensemble) {
        logits.push_back(fused ? b : b.to(torch::kDouble));
        weights = {0.25, 0.75};
      }
      auto [value, token] = top_log_probs(logits, weights, 5);
      std::vector<int64_t> rows, tokens;
      for (int64_t r = 5; r >= 0; r -= 2) {  // some rows, not in order
        for (int64_t i = 0; i < 5; ++i) {
          rows.push_back(r);
          tokens.push_back(token[r][i].item<int64_t>());
        }
        rows.push_back(r);
        tokens.push_back(299);  // one no row has among its best (almost surely)
      }
      const auto at = log_probs_at(logits, weights, rows, tokens);
      const auto all = ensemble ? torch::log_softmax(a, -1) * 0.25 + torch::log_softmax(b, -1) * 0.75
                                : torch::log_softmax(a, -1);
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto got = at[static_cast<int64_t>(i)].item<float>();
        if (i % 6 < 5) {
          EXPECT_EQ(got, value[rows[i]][static_cast<int64_t>(i % 6)].item<float>()) << i;
        }
        EXPECT_NEAR(got, all[rows[i]][tokens[i]].item<float>(), 1e-5) << i;
      }
    }
  }
}

}  // namespace
}  // namespace tandem::decode
