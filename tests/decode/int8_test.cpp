// A Transformer quantized to int8 decodes as its float self does, nearly: the trained reverse
// model's logits stay close and its translations agree on almost every sentence; the float
// parameters are untouched, so checkpoints written later are unchanged.
#include <gtest/gtest.h>

#include "tests/decode/fixtures.h"
#include "trainer/decode/translate.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

TEST(Int8, TheTrainedModelTranslatesAsInFloatOnAlmostEverySentence) {
  // As the tools decode: one intra-op thread (oneDNN's many small parallel regions crawl when
  // other processes hold the cores).
  torch::set_num_threads(1);
  auto float_model = reverse_model(150);
  model::Transformer int8_model(float_model->options());  // a copy of it
  {
    torch::NoGradGuard no_grad;
    auto from = float_model->parameters(), to = int8_model->parameters();
    for (size_t i = 0; i < from.size(); ++i) to[i].copy_(from[i]);
  }
  int8_model->eval();
  int8_model->freeze(model::InferencePrecision::kInt8);
  EXPECT_EQ(int8_model->frozen(), model::InferencePrecision::kInt8);
  auto float_params = float_model->parameters(), int8_params = int8_model->parameters();
  for (size_t i = 0; i < float_params.size(); ++i) {
    EXPECT_TRUE(torch::equal(float_params[i], int8_params[i])) << "parameter " << i;
  }

  torch::manual_seed(31);
  std::vector<std::vector<int32_t>> sentences;
  for (int i = 0; i < 60; ++i) sentences.push_back(random_sentence(2 + i % 7));
  torch::NoGradGuard no_grad;
  const auto src = source_batch(sentences);
  const auto tgt = src.narrow(1, 0, 4).clone();
  tgt.select(1, 0).fill_(kBosId);
  tgt.masked_fill_(tgt.eq(kEosId), kPadId);
  const auto exact = float_model->forward(src, tgt), approx = int8_model->forward(src, tgt);
  const double spread = exact.std().item<double>();
  EXPECT_LT((approx - exact).abs().max().item<double>(), 0.25 * spread);
  EXPECT_FALSE(torch::equal(approx, exact));

  auto options = DecodeOptions();
  options.beam_size = 4;
  const auto want = translate(float_model, sentences, options);
  const auto got = translate(int8_model, sentences, options);
  // This model is small and unsure by design (beam search must matter), so int8's rounding moves
  // some close calls; it must not cost correct translations (the reversed source) beyond a few.
  int same = 0, right_float = 0, right_int8 = 0;
  for (size_t i = 0; i < sentences.size(); ++i) {
    const std::vector<int32_t> reversed(sentences[i].rbegin(), sentences[i].rend());
    same += got[i].tokens == want[i].tokens;
    right_float += want[i].tokens == reversed;
    right_int8 += got[i].tokens == reversed;
  }
  EXPECT_GE(same, 48) << same << " of " << sentences.size() << " translations unchanged";
  EXPECT_GE(right_int8, right_float - 3) << "correct: " << right_int8 << " in int8, " << right_float
                                         << " in float, of " << sentences.size();
}

}  // namespace
}  // namespace tandem::decode
