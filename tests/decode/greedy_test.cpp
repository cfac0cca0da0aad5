// Tests of batched greedy decoding: it must equal a naive loop that re-runs the full decoder for
// one sentence at a time, respect the length limit, and translate() must keep the input order.
#include "trainer/decode/greedy.h"

#include <gtest/gtest.h>

#include <set>
#include <vector>

#include "tests/decode/fixtures.h"
#include "trainer/decode/translate.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

TEST(GreedyDecode, BatchedIncrementalEqualsNaiveFullDecoderLoop) {
  auto model = tiny_model(2.0);
  torch::manual_seed(1);
  std::vector<std::vector<int32_t>> sentences;
  for (int64_t len : {3, 7, 1, 5, 9, 4, 6, 2}) sentences.push_back(random_sentence(len));
  DecodeOptions options;
  options.max_len_a = 1.0;
  options.max_len_b = 2;
  auto hyps = greedy_decode(model, source_batch(sentences), options);
  ASSERT_EQ(hyps.size(), sentences.size());
  std::set<size_t> lengths;
  int ended_by_eos = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    int64_t max_steps = static_cast<int64_t>(sentences[i].size()) + 1 + 2;
    expect_same(hyps[i], naive_greedy(model, sentences[i], max_steps), "row " + std::to_string(i));
    lengths.insert(hyps[i].tokens.size());
    ended_by_eos += static_cast<int64_t>(hyps[i].tokens.size()) < max_steps;
  }
  // Rows must finish at different steps and some by EOS, or dropping finished rows and the EOS
  // stop were never exercised.
  EXPECT_GE(lengths.size(), 3u);
  EXPECT_GE(ended_by_eos, 3);
  EXPECT_LT(ended_by_eos, static_cast<int>(sentences.size()));
}

TEST(GreedyDecode, StopsAtTheLengthLimitWithoutEos) {
  auto model = tiny_model(-100.0);  // EOS is never the argmax
  torch::manual_seed(2);
  std::vector<std::vector<int32_t>> sentences = {random_sentence(2), random_sentence(6)};
  DecodeOptions options;
  options.max_len_a = 0.5;
  options.max_len_b = 1;
  auto hyps = greedy_decode(model, source_batch(sentences), options);
  // floor(0.5 * (len + 1)) + 1 steps, every one a word.
  EXPECT_EQ(hyps[0].tokens.size(), 2u);
  EXPECT_EQ(hyps[1].tokens.size(), 4u);
  expect_same(hyps[0], naive_greedy(model, sentences[0], 2), "row 0");
  expect_same(hyps[1], naive_greedy(model, sentences[1], 4), "row 1");
}

// A model that would end every sentence at once (EOS far likelier than any word): with --min-len
// N each translation has exactly N tokens, as the naive loop gives them; with 0 it is empty.
TEST(GreedyDecode, MinLenForbidsEosUntilThatManyTokens) {
  auto model = tiny_model(100.0);
  torch::manual_seed(5);
  std::vector<std::vector<int32_t>> sentences = {random_sentence(3), random_sentence(6)};
  for (const int64_t min_len : {0, 1, 3}) {
    DecodeOptions options;
    options.min_len = min_len;
    auto hyps = greedy_decode(model, source_batch(sentences), options);
    for (size_t i = 0; i < sentences.size(); ++i) {
      const auto what = "min_len " + std::to_string(min_len) + ", row " + std::to_string(i);
      EXPECT_EQ(static_cast<int64_t>(hyps[i].tokens.size()), min_len) << what;
      EXPECT_TRUE(hyps[i].ended) << what;
      const auto limit = step_limit(sentences[i].size(), options, model->options().max_positions);
      expect_same(hyps[i], naive_greedy(model, sentences[i], limit, min_len), what);
    }
  }
  DecodeOptions negative;
  negative.min_len = -1;
  EXPECT_THROW(greedy_decode(model, source_batch(sentences), negative), std::invalid_argument);
}

TEST(GreedyDecode, EmptyBatchGivesNoHypotheses) {
  auto model = tiny_model(0.0);
  auto hyps = greedy_decode(model, torch::zeros({0, 5}, torch::kLong), DecodeOptions());
  EXPECT_TRUE(hyps.empty());
}

TEST(Translate, ReturnsInputOrderAndEqualsDecodingEachSentenceAlone) {
  auto model = tiny_model(2.0);
  torch::manual_seed(3);
  std::vector<std::vector<int32_t>> sentences;
  for (int64_t len : {5, 1, 8, 0, 3, 8, 2, 6, 4}) sentences.push_back(random_sentence(len));
  DecodeOptions options;
  options.beam_size = 1;
  options.batch_tokens = 14;  // several batches of different sizes
  auto hyps = translate(model, sentences, options);
  ASSERT_EQ(hyps.size(), sentences.size());
  for (size_t i = 0; i < sentences.size(); ++i) {
    auto alone = greedy_decode(model, source_row(sentences[i]), options);
    expect_same(hyps[i], alone.at(0), "sentence " + std::to_string(i));
  }
}

TEST(Translate, InvalidOptionsThrow) {
  auto model = tiny_model(0.0);
  DecodeOptions options;
  options.batch_tokens = 0;
  EXPECT_THROW(translate(model, {{5, 6}}, options), std::invalid_argument);
  options = DecodeOptions();
  options.max_len_a = -1;
  EXPECT_THROW(greedy_decode(model, source_row({5, 6}), options), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::decode
