// Tests of batched greedy decoding: it must equal a naive loop that re-runs the full decoder for
// one sentence at a time, respect the length limit, and translate() must keep the input order.
#include "trainer/decode/greedy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

namespace tandem::decode {
namespace {

using model::kBosId;
using model::kEosId;
using model::kPadId;

constexpr int64_t kVocab = 24;
constexpr int64_t kFirstWord = 4;

// A random tiny model whose EOS bias makes sentences end after different numbers of steps.
model::Transformer tiny_model(double eos_bias) {
  torch::manual_seed(17);
  model::TransformerOptions o;
  o.vocab_size = kVocab;
  o.d_model = 16;
  o.heads = 2;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 32;
  o.dropout = 0.0;
  o.max_positions = 64;
  model::Transformer model(o);
  torch::NoGradGuard no_grad;
  for (auto& item : model->named_parameters()) {
    if (item.key() == "output_proj.bias") item.value()[kEosId].fill_(eos_bias);
  }
  model->eval();
  return model;
}

std::vector<int32_t> random_sentence(int64_t len) {
  auto t = torch::randint(kFirstWord, kVocab, {len}, torch::kInt);
  return std::vector<int32_t>(t.data_ptr<int32_t>(), t.data_ptr<int32_t>() + len);
}

// sentence + EOS → [1, len + 1] int64.
torch::Tensor source_row(const std::vector<int32_t>& sentence) {
  std::vector<int64_t> ids(sentence.begin(), sentence.end());
  ids.push_back(kEosId);
  return torch::tensor(ids, torch::kLong).unsqueeze(0);
}

// Rows right-padded with kPadId → [rows, longest + 1].
torch::Tensor source_batch(const std::vector<std::vector<int32_t>>& sentences) {
  std::vector<torch::Tensor> rows;
  int64_t width = 0;
  for (const auto& s : sentences) {
    rows.push_back(source_row(s)[0]);
    width = std::max(width, rows.back().size(0));
  }
  auto batch = torch::full({static_cast<int64_t>(rows.size()), width}, kPadId, torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) batch[i].slice(0, 0, rows[i].size(0)).copy_(rows[i]);
  return batch;
}

// The obvious algorithm: re-run the whole decoder on the prefix, take the argmax of the last
// position, stop at EOS or after max_steps steps.
Hypothesis naive_greedy(model::Transformer& model, const std::vector<int32_t>& sentence,
                        int64_t max_steps) {
  torch::NoGradGuard no_grad;
  auto src = source_row(sentence);
  std::vector<int64_t> prefix = {kBosId};
  Hypothesis hyp;
  for (int64_t step = 0; step < max_steps; ++step) {
    auto tgt = torch::tensor(prefix, torch::kLong).unsqueeze(0);
    auto logp = torch::log_softmax(model->forward(src, tgt)[0][-1].to(torch::kDouble), -1);
    int64_t best = logp.argmax().item<int64_t>();
    hyp.score += logp[best].item<double>();
    if (best == kEosId) break;
    hyp.tokens.push_back(static_cast<int32_t>(best));
    prefix.push_back(best);
  }
  return hyp;
}

void expect_same(const Hypothesis& actual, const Hypothesis& expected, const std::string& what) {
  EXPECT_EQ(actual.tokens, expected.tokens) << what;
  EXPECT_NEAR(actual.score, expected.score, 1e-4) << what;
}

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
