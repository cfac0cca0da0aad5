// Decoding on a GPU against the CPU (CTest label gpu): beam search and greedy decoding over a
// batch whose sentences end at different steps. Off the CPU the decoder's self-attention cache
// keeps decoder row r in cache row r and drops finished rows by moving the others, where the CPU
// rewrites a table; a GPU run once fed attention the dropped rows too (tandem-decode --device cuda
// --beam 1 stopped on a shape check).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "tests/decode/fixtures.h"
#include "tests/gpu/gpu_support.h"
#include "trainer/decode/beam.h"

namespace tandem {
namespace {

using test::kGpu;

TEST(Gpu, BeamSearchOnTheGpuEqualsTheCpuAsSentencesFinish) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(1);
  const auto sentences = decode::fixtures::random_sentences({3, 7, 1, 5, 9, 4, 6, 2, 8, 3});
  const auto src = decode::fixtures::source_batch(sentences);
  // EOS's output bias: likely enough to end sentences at different steps, at each beam.
  for (const auto& [beam, eos_bias] : {std::pair<int64_t, double>{1, 2.0}, {4, 1.0}}) {
    auto cpu = decode::fixtures::tiny_model(eos_bias);
    auto gpu = decode::fixtures::tiny_model(eos_bias);  // the same seed: the same weights
    gpu->to(kGpu);
    decode::DecodeOptions options;
    options.beam_size = beam;
    options.max_len_a = 1.0;
    options.max_len_b = 6;
    const auto expected = decode::beam_search(cpu, src, options);
    const auto got = decode::beam_search(gpu, src.to(kGpu), options);
    ASSERT_EQ(got.size(), expected.size());
    std::set<size_t> lengths;  // the steps the sentences took: several, or nothing was dropped
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(got[i].size(), 1u);
      EXPECT_EQ(got[i][0].tokens, expected[i][0].tokens) << "beam " << beam << ", sentence " << i;
      EXPECT_EQ(got[i][0].ended, expected[i][0].ended) << "beam " << beam << ", sentence " << i;
      EXPECT_NEAR(got[i][0].score, expected[i][0].score, 1e-4 * std::abs(expected[i][0].score))
          << "beam " << beam << ", sentence " << i;
      lengths.insert(decode::hypothesis_length(expected[i][0]));
    }
    EXPECT_GE(lengths.size(), 3u) << "beam " << beam << ": the sentences should end apart";
  }
}

}  // namespace
}  // namespace tandem
