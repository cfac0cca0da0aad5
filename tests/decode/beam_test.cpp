// Tests of batched beam search: beam 1 is greedy decoding; results equal a naive beam search that
// re-runs the full decoder for every hypothesis; n-best lists are sorted, distinct and normalised
// as documented; a wider beam finds better-scoring translations; batching, input order and threads
// do not change results; the length limit holds. Ensembles: a model with itself is the model
// alone, bit for bit; two models equal the naive search over their weighted log-probabilities.
// Stopping a sentence early once its n best are settled returns what the naive search returns.
#include "trainer/decode/beam.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <set>
#include <vector>

#include "tests/decode/fixtures.h"
#include "trainer/decode/greedy.h"
#include "trainer/decode/translate.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

DecodeOptions beam_options(int64_t beam, int64_t nbest, double alpha) {
  DecodeOptions options;
  options.beam_size = beam;
  options.nbest = nbest;
  options.length_penalty = alpha;
  options.max_len_a = 1.0;
  options.max_len_b = 2;
  return options;
}

// beam_search on `sentences` as one batch must equal naive_beam on each; returns how many of the
// hypotheses ended by EOS and how many at the limit, so callers can check both were exercised.
std::pair<int, int> expect_equals_naive(const Ensemble& ensemble,
                                        const std::vector<std::vector<int32_t>>& sentences,
                                        const DecodeOptions& options) {
  auto lists = beam_search(ensemble, source_batch(sentences), options);
  EXPECT_EQ(lists.size(), sentences.size());
  std::pair<int, int> ends{0, 0};
  for (size_t i = 0; i < sentences.size(); ++i) {
    auto limit = step_limit(sentences[i].size(), options, ensemble.max_positions());
    auto expected = naive_beam(ensemble, sentences[i], options, limit);
    EXPECT_EQ(lists[i].size(), expected.size()) << "sentence " << i;
    if (lists[i].size() != expected.size()) continue;
    for (size_t n = 0; n < expected.size(); ++n) {
      auto what = "sentence " + std::to_string(i) + ", hypothesis " + std::to_string(n);
      expect_same(lists[i][n], expected[n], what);
      EXPECT_NEAR(lists[i][n].normalized, expected[n].normalized, 1e-4) << what;
      (lists[i][n].ended ? ends.first : ends.second) += 1;
    }
  }
  return ends;
}

TEST(BeamSearch, BeamOneIsGreedyOnRandomAndTrainedModels) {
  auto random = tiny_model(2.0);
  torch::manual_seed(1);
  auto sentences = random_sentences({3, 7, 1, 5, 9, 4, 6, 2});
  for (auto* model : {&random, &trained_model()}) {
    auto options = beam_options(1, 1, 0.6);
    auto lists = beam_search(*model, source_batch(sentences), options);
    auto greedy = greedy_decode(*model, source_batch(sentences), options);
    for (size_t i = 0; i < sentences.size(); ++i) {
      ASSERT_EQ(lists[i].size(), 1u);
      // The same code path: identical, bit for bit.
      EXPECT_EQ(lists[i][0].tokens, greedy[i].tokens);
      EXPECT_EQ(lists[i][0].score, greedy[i].score);
      // And the argmax loop over the full decoder agrees.
      auto limit = step_limit(sentences[i].size(), options, (*model)->options().max_positions);
      expect_same(lists[i][0], naive_greedy(*model, sentences[i], limit),
                  "sentence " + std::to_string(i));
    }
  }
}

TEST(BeamSearch, EqualsNaiveFullDecoderBeamSearchOnARandomModel) {
  auto model = tiny_model(2.5);  // EOS likely: many candidates finish, at different steps
  torch::manual_seed(2);
  auto sentences = random_sentences({3, 7, 1, 5, 9, 4, 6, 2});
  auto [by_eos, at_limit] = expect_equals_naive(model, sentences, beam_options(4, 4, 0.6));
  EXPECT_GE(by_eos, 8);
  EXPECT_GE(at_limit, 1);
}

// A model whose EOS is likely from the first step: at min_len 0 empty translations take finished
// places; at min_len 1 and 2 none is shorter, and every n-best list equals the naive search's.
TEST(BeamSearch, MinLenKeepsShorterHypothesesOutOfTheFinishedOnes) {
  auto model = tiny_model(4.0);
  torch::manual_seed(6);
  auto sentences = random_sentences({3, 7, 1, 5});
  for (const int64_t min_len : {0, 1, 2}) {
    auto options = beam_options(4, 4, 0.6);
    options.min_len = min_len;
    expect_equals_naive(model, sentences, options);
    auto lists = beam_search(model, source_batch(sentences), options);
    size_t shortest = 1000;
    for (const auto& list : lists) {
      for (const auto& h : list) shortest = std::min(shortest, h.tokens.size());
    }
    EXPECT_EQ(shortest, static_cast<size_t>(min_len)) << "min_len " << min_len;
  }
}

// A forced first token (a target language's code): every hypothesis starts with it at no score,
// and the rest is the naive search from there, at beams 1 and 4, min_len 0 and 2, each row its
// own token.
TEST(BeamSearch, AForcedFirstTokenStartsEveryHypothesisAndTheSearchGoesOnFromIt) {
  auto model = tiny_model(1.5);
  torch::manual_seed(3);
  const auto sentences = random_sentences({3, 5, 2, 6});
  const std::vector<int32_t> first = {7, 9, 7, 12};
  for (const int64_t beam : {1, 4}) {
    for (const int64_t min_len : {0, 2}) {
      auto options = beam_options(beam, beam, 0.6);
      options.min_len = min_len;
      auto lists = beam_search(model, source_batch(sentences), options, first_token_rows(first));
      for (size_t i = 0; i < sentences.size(); ++i) {
        const auto limit = step_limit(sentences[i].size(), options, model->options().max_positions);
        const auto expected = naive_beam(model, sentences[i], options, limit, first[i]);
        ASSERT_EQ(lists[i].size(), expected.size());
        for (size_t n = 0; n < expected.size(); ++n) {
          const auto what = "beam " + std::to_string(beam) + ", min_len " +
                            std::to_string(min_len) + ", sentence " + std::to_string(i);
          ASSERT_FALSE(lists[i][n].tokens.empty()) << what;
          EXPECT_EQ(lists[i][n].tokens.front(), first[i]) << what;
          EXPECT_GE(static_cast<int64_t>(lists[i][n].tokens.size()), 1 + min_len) << what;
          expect_same(lists[i][n], expected[n], what);
        }
      }
    }
  }
  EXPECT_THROW(
      beam_search(model, source_batch(sentences), beam_options(2, 1, 0.6), first_token_rows({7})),
      std::invalid_argument);
}

TEST(BeamSearch, EqualsNaiveFullDecoderBeamSearchOnATrainedModel) {
  torch::manual_seed(3);
  auto sentences = random_sentences({2, 8, 5, 3, 6, 4});
  auto [by_eos, at_limit] =
      expect_equals_naive(trained_model(), sentences, beam_options(3, 2, 1.0));
  EXPECT_GE(by_eos, 6);
  (void)at_limit;  // a trained model rarely runs to the limit
}

// With fewer results than hypotheses (nbest < K), search stops a sentence once no live
// hypothesis can still place among them; the naive search runs until K have finished. Both
// signs of alpha (the bound's two ends) and alpha 0.
TEST(BeamSearch, StoppingOnceTheResultsAreSettledReturnsTheNaiveSearchsResults) {
  auto random = tiny_model(2.5);
  torch::manual_seed(5);
  auto sentences = random_sentences({3, 7, 1, 5, 9, 4});
  int by_eos = 0;
  for (auto* model : {&random, &trained_model()}) {
    for (double alpha : {-0.5, 0.0, 0.6, 1.0}) {
      for (int64_t nbest : {1, 2}) {
        by_eos += expect_equals_naive(*model, sentences, beam_options(4, nbest, alpha)).first;
      }
    }
  }
  EXPECT_GE(by_eos, 60);
}

TEST(BeamSearch, NbestListsAreSortedDistinctAndNormalisedByLengthWithEos) {
  auto model = tiny_model(1.5);
  torch::manual_seed(4);
  auto sentences = random_sentences({4, 1, 6, 3, 8});
  for (double alpha : {0.0, 0.6, 1.0}) {
    auto lists = beam_search(model, source_batch(sentences), beam_options(5, 5, alpha));
    for (const auto& list : lists) {
      ASSERT_EQ(list.size(), 5u);
      std::set<std::vector<int32_t>> distinct;
      for (size_t n = 0; n < list.size(); ++n) {
        const auto& h = list[n];
        distinct.insert(h.tokens);
        double length = static_cast<double>(h.tokens.size()) + (h.ended ? 1.0 : 0.0);
        EXPECT_DOUBLE_EQ(h.normalized, h.score / std::pow(length, alpha));
        if (n > 0) {
          EXPECT_GE(list[n - 1].normalized, h.normalized);
        }
      }
      EXPECT_EQ(distinct.size(), list.size());
    }
  }
}

TEST(BeamSearch, WiderBeamScoresAtLeastGreedyOnATrainedModel) {
  torch::manual_seed(6);
  std::vector<int64_t> lengths(40);
  for (auto& len : lengths) len = torch::randint(2, 9, {1}).item<int64_t>();
  auto sentences = random_sentences(lengths);
  auto greedy = translate(trained_model(), sentences, beam_options(1, 1, 0.6));
  auto beam = translate(trained_model(), sentences, beam_options(5, 1, 0.6));
  double greedy_sum = 0, beam_sum = 0;
  int better = 0;
  // Float32 arithmetic over batches of different widths: equal hypotheses may differ by ~1e-7.
  constexpr double kTolerance = 1e-5;
  for (size_t i = 0; i < sentences.size(); ++i) {
    EXPECT_GE(beam[i].normalized, greedy[i].normalized - kTolerance) << "sentence " << i;
    better += beam[i].normalized > greedy[i].normalized + kTolerance;
    greedy_sum += greedy[i].normalized;
    beam_sum += beam[i].normalized;
  }
  EXPECT_GE(beam_sum, greedy_sum);
  EXPECT_GE(better, 1) << "the model is too sure of itself for this test to say anything";
  std::printf("beam 5 beats greedy on %d of %zu sentences; mean normalised score %.4f vs %.4f\n",
              better, sentences.size(), beam_sum / sentences.size(), greedy_sum / sentences.size());
}

TEST(BeamSearch, TranslateOfAShuffledBatchEqualsEachSentenceAlone) {
  auto model = tiny_model(2.0);
  torch::manual_seed(7);
  auto sentences = random_sentences({5, 1, 8, 0, 3, 8, 2, 6, 4, 7});
  std::vector<size_t> order(sentences.size());
  std::iota(order.begin(), order.end(), 0);
  std::reverse(order.begin(), order.begin() + 5);
  std::rotate(order.begin(), order.begin() + 3, order.end());
  std::vector<std::vector<int32_t>> shuffled;
  for (auto i : order) shuffled.push_back(sentences[i]);
  auto options = beam_options(4, 3, 0.6);
  options.batch_tokens = 14;  // several batches of different sizes
  auto lists = translate_nbest(model, shuffled, options);
  ASSERT_EQ(lists.size(), shuffled.size());
  for (size_t i = 0; i < shuffled.size(); ++i) {
    auto alone = beam_search(model, source_row(shuffled[i]), options).at(0);
    ASSERT_EQ(lists[i].size(), alone.size());
    for (size_t n = 0; n < alone.size(); ++n) {
      expect_same(lists[i][n], alone[n], "sentence " + std::to_string(order[i]));
    }
  }
}

TEST(BeamSearch, NoHypothesisOutgrowsTheLengthLimit) {
  auto model = tiny_model(-100.0);  // EOS never wins: every hypothesis runs to the limit
  torch::manual_seed(8);
  auto sentences = random_sentences({2, 6, 3});
  auto options = beam_options(3, 3, 0.6);
  options.max_len_a = 0.5;
  options.max_len_b = 1;
  auto lists = beam_search(model, source_batch(sentences), options);
  const std::vector<size_t> expected = {2, 4, 3};  // floor(0.5 * (len + 1)) + 1
  for (size_t i = 0; i < sentences.size(); ++i) {
    ASSERT_EQ(lists[i].size(), 3u);
    for (const auto& h : lists[i]) {
      EXPECT_EQ(h.tokens.size(), expected[i]);
      EXPECT_FALSE(h.ended);
    }
  }
  // A limit past the position table is cut to it.
  options.max_len_b = 1000;
  auto clamped = beam_search(model, source_row(sentences[0]), options);
  EXPECT_EQ(clamped[0][0].tokens.size(), static_cast<size_t>(tiny_options().max_positions));
}

TEST(BeamSearch, EmptyBatchGivesNoLists) {
  auto model = tiny_model(0.0);
  EXPECT_TRUE(beam_search(model, torch::zeros({0, 5}, torch::kLong), DecodeOptions()).empty());
}

TEST(BeamSearch, InvalidOptionsThrow) {
  auto model = tiny_model(0.0);
  auto src = source_row({5, 6});
  auto expect_throw = [&](DecodeOptions options) {
    EXPECT_THROW(beam_search(model, src, options), std::invalid_argument);
    EXPECT_THROW(translate_nbest(model, {{5, 6}}, options), std::invalid_argument);
  };
  expect_throw(beam_options(0, 1, 0.6));
  expect_throw(beam_options(kVocab / 2 + 1, 1, 0.6));  // 2K candidates must fit the vocabulary
  expect_throw(beam_options(4, 0, 0.6));
  expect_throw(beam_options(4, 5, 0.6));
  expect_throw(beam_options(4, 1, std::nan("")));
}

TEST(BeamSearch, ThreadsTranslateTheSameBatchesToTheSameResults) {
  auto model = tiny_model(2.0);
  torch::manual_seed(9);
  auto sentences = random_sentences({5, 1, 8, 0, 3, 8, 2, 6, 4, 7, 9, 3, 5, 2, 6, 1});
  auto options = beam_options(4, 2, 0.6);
  options.batch_tokens = 12;  // many small batches for the threads to share
  const auto one = translate_nbest(model, sentences, options);
  for (const int64_t threads : {2, 3, 64}) {
    options.threads = threads;
    const auto many = translate_nbest(model, sentences, options);
    ASSERT_EQ(many.size(), one.size());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_EQ(many[i].size(), one[i].size());
      for (size_t n = 0; n < one[i].size(); ++n) {
        EXPECT_EQ(many[i][n].tokens, one[i][n].tokens) << threads << " threads, sentence " << i;
        EXPECT_EQ(many[i][n].score, one[i][n].score) << threads << " threads, sentence " << i;
      }
    }
  }
}

TEST(Ensemble, AModelWithItselfTranslatesExactlyAsTheModelAlone) {
  torch::manual_seed(10);
  auto sentences = random_sentences({2, 8, 5, 3, 6, 4, 7, 1});
  for (auto model : {tiny_model(2.5), trained_model()}) {
    const Ensemble twice({model, model}, {1.0, 1.0});
    for (const int64_t beam : {1, 5}) {
      const auto options = beam_options(beam, beam, 0.6);
      const auto alone = translate_nbest(model, sentences, options);
      const auto both = translate_nbest(twice, sentences, options);
      for (size_t i = 0; i < sentences.size(); ++i) {
        ASSERT_EQ(both[i].size(), alone[i].size());
        for (size_t n = 0; n < alone[i].size(); ++n) {
          EXPECT_EQ(both[i][n].tokens, alone[i][n].tokens) << "beam " << beam << ", sentence " << i;
          EXPECT_EQ(both[i][n].score, alone[i][n].score) << "beam " << beam << ", sentence " << i;
          EXPECT_EQ(both[i][n].ended, alone[i][n].ended);
        }
      }
    }
  }
}

TEST(Ensemble, TwoModelsEqualTheNaiveSearchOverTheirWeightedLogProbabilities) {
  torch::manual_seed(11);
  auto sentences = random_sentences({2, 8, 5, 3, 6, 4});
  // A trained model and a random one disagree, so the weights decide what wins.
  for (const double weight : {1.0, 3.0}) {
    const Ensemble ensemble({trained_model(), tiny_model(2.0)}, {weight, 1.0});
    EXPECT_DOUBLE_EQ(ensemble.weights()[0], weight / (weight + 1.0));
    auto [by_eos, at_limit] = expect_equals_naive(ensemble, sentences, beam_options(3, 3, 0.6));
    EXPECT_GE(by_eos + at_limit, 18);
  }
  // And its translations differ from each model's alone (the combination does something).
  const Ensemble ensemble({trained_model(), tiny_model(2.0)}, {1.0, 1.0});
  const auto options = beam_options(3, 1, 0.6);
  const auto mixed = translate_nbest(ensemble, sentences, options);
  const auto first = translate_nbest(trained_model(), sentences, options);
  const auto second = translate_nbest(tiny_model(2.0), sentences, options);
  int differ_first = 0, differ_second = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    differ_first += mixed[i][0].tokens != first[i][0].tokens;
    differ_second += mixed[i][0].tokens != second[i][0].tokens;
  }
  EXPECT_GE(differ_first, 1);
  EXPECT_GE(differ_second, 1);
}

TEST(Ensemble, RefusesMismatchedWeightsAndVocabularies) {
  auto model = tiny_model(0.0);
  EXPECT_THROW(Ensemble({model, model}, {1.0}), std::invalid_argument);
  EXPECT_THROW(Ensemble({model, model}, {1.0, 0.0}), std::invalid_argument);
  EXPECT_THROW(Ensemble({model, model}, {1.0, std::nan("")}), std::invalid_argument);
  EXPECT_THROW(Ensemble({}, {}), std::invalid_argument);
  auto options = tiny_options();
  options.vocab_size = kVocab + 1;
  model::Transformer other(options);
  try {
    Ensemble({model, other}, {1.0, 1.0});
    ADD_FAILURE() << "models with different vocabularies were accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model 2 has 25 output tokens, model 1 has 24"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::decode
