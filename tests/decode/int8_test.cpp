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
  // At the target's real positions (int8 attends per sentence: a padding position's output is
  // not computed).
  const auto real = tgt.ne(kPadId).unsqueeze(-1);
  const auto exact = float_model->forward(src, tgt).masked_select(real);
  const auto approx = int8_model->forward(src, tgt).masked_select(real);
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

// A sentence's int8 translation does not depend on what it is batched with: each of 64 sentences
// of 1 to 40 words decoded alone gives the tokens and the score (every bit) it gets in one batch of
// all 64, and in batches of a few; int8 attends per sentence (AttentionMask::per_sentence).
TEST(Int8, ASentenceTranslatesToTheSameBitsAloneAndInABatchOfMixedLengths) {
  torch::set_num_threads(1);
  auto model = frozen_copy(reverse_model(150), kernels::InferencePrecision::kInt8);
  torch::manual_seed(8);
  std::vector<std::vector<int32_t>> sentences;
  for (int i = 0; i < 64; ++i) sentences.push_back(random_sentence(1 + (i * 13) % 40));
  for (const int64_t beam : {1, 4}) {
    DecodeOptions options;
    options.beam_size = beam;
    options.batch_tokens = 1 << 20;  // one batch of all 64
    const auto together = translate(model, sentences, options);
    options.batch_tokens = 90;  // a few at a time
    const auto few = translate(model, sentences, options);
    for (size_t i = 0; i < sentences.size(); ++i) {
      const auto alone = translate(model, {sentences[i]}, options).front();
      EXPECT_EQ(together[i].tokens, alone.tokens) << "beam " << beam << ", sentence " << i;
      EXPECT_EQ(together[i].score, alone.score) << "beam " << beam << ", sentence " << i;
      EXPECT_EQ(few[i].score, alone.score) << "beam " << beam << ", sentence " << i;
    }
  }
}

}  // namespace
}  // namespace tandem::decode
