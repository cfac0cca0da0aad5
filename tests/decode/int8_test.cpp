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
  auto int8_model = frozen_copy(float_model, kernels::InferencePrecision::kInt8);

  const auto probe = probe_batch(31);
  const auto& sentences = probe.sentences;
  const auto &src = probe.src, &tgt = probe.tgt;
  torch::NoGradGuard no_grad;
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
