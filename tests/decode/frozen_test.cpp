// A Transformer frozen in fp32 (packed weights, the decoding tools' CPU default) decodes as the
// model on its parameters does: the trained reverse model's logits agree to float rounding and
// its beam-4 translations are the same, token for token and score for score within rounding; the
// parameters themselves are untouched.
#include <gtest/gtest.h>

#include "tests/decode/fixtures.h"
#include "trainer/decode/translate.h"

namespace tandem::decode {
namespace {

using namespace fixtures;

TEST(FrozenFp32, TheTrainedModelTranslatesAsOnItsParameters) {
  torch::set_num_threads(1);  // as the tools decode
  auto model = reverse_model(150);
  auto frozen = frozen_copy(model, kernels::InferencePrecision::kFp32);
  EXPECT_FALSE(model->frozen().has_value());

  const auto probe = probe_batch(33);
  const auto& sentences = probe.sentences;
  const auto &src = probe.src, &tgt = probe.tgt;
  torch::NoGradGuard no_grad;
  const auto exact = model->forward(src, tgt), packed = frozen->forward(src, tgt);
  EXPECT_LT((packed - exact).abs().max().item<double>(), 1e-4 * exact.abs().max().item<double>());

  DecodeOptions options;
  options.beam_size = 4;
  const auto want = translate(model, sentences, options);
  const auto got = translate(frozen, sentences, options);
  for (size_t i = 0; i < sentences.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "sentence " << i;
    EXPECT_NEAR(got[i].score, want[i].score, 1e-4) << "sentence " << i;
  }
}

}  // namespace
}  // namespace tandem::decode
