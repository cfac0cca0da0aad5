// The fused kernels against independent computations: attention (forward and gradients) against a
// per-sentence, per-head, per-query loop over plain tensor ops in double precision with autograd,
// with padding, causal masks and a sentence without keys; decoding's step_attention (both of its
// paths) against the same loop, with the cache-row table gathered by hand; row_attention's bits
// alone and in a padded batch; dropout_add's values, mask rate, seeding and gradient.
#include "trainer/kernels/fused/ops.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <vector>

#include "trainer/kernels/cpu/step_attention.h"

namespace tandem::kernels {
namespace {

using torch::indexing::Slice;

torch::Tensor leaf(int64_t batch, int64_t len, int64_t width) {
  return torch::randn({batch, len, width}, torch::kDouble).requires_grad_(true);
}

// [batch, len] bool, true from each sentence's length on.
torch::Tensor padding(const std::vector<int64_t>& lengths, int64_t len) {
  auto pad = torch::zeros({static_cast<int64_t>(lengths.size()), len}, torch::kBool);
  for (size_t b = 0; b < lengths.size(); ++b) pad[b].slice(0, lengths[b]).fill_(true);
  return pad;
}

// Query i of sentence b, head h: softmax over its visible keys of q·k / sqrt(d_head), times v;
// uniform over all keys when none is visible.
torch::Tensor reference_attention(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& pad, bool causal,
                                  int64_t heads) {
  const int64_t batch = q.size(0), q_len = q.size(1), k_len = k.size(1), d = q.size(2);
  const int64_t dh = d / heads;
  std::vector<torch::Tensor> rows;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t i = 0; i < q_len; ++i) {
      std::vector<int64_t> keys;
      for (int64_t j = 0; j < k_len; ++j) {
        if (!pad[b][j].item<bool>() && (!causal || j <= i)) keys.push_back(j);
      }
      std::vector<torch::Tensor> per_head;
      for (int64_t h = 0; h < heads; ++h) {
        const auto cols = Slice(h * dh, (h + 1) * dh);
        if (keys.empty()) {
          per_head.push_back(v.index({b, Slice(), cols}).mean(0));
          continue;
        }
        const auto index = torch::tensor(keys);
        const auto ks = k[b].index_select(0, index).index({Slice(), cols});
        const auto vs = v[b].index_select(0, index).index({Slice(), cols});
        const auto w = torch::softmax(ks.matmul(q.index({b, i, cols})) / std::sqrt(dh), 0);
        per_head.push_back(w.matmul(vs));
      }
      rows.push_back(torch::cat(per_head));
    }
  }
  return torch::stack(rows).view({batch, q_len, d});
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(FusedAttention, SelfAttentionWithPaddingAndCausalMaskEqualsReferenceWithGradients) {
  torch::manual_seed(1);
  const int64_t heads = 2, d = 8, len = 6;
  const auto pad = padding({6, 3, 1}, len);
  auto qkv = leaf(3, len, 3 * d);
  const auto weights = torch::randn({3, len, d}, torch::kDouble);
  auto out = fused_attention(qkv, torch::Tensor(), heads, AttentionMask{pad, true});
  (out * weights).sum().backward();

  auto ref_qkv = qkv.detach().clone().requires_grad_(true);
  auto expected = reference_attention(ref_qkv.narrow(2, 0, d), ref_qkv.narrow(2, d, d),
                                      ref_qkv.narrow(2, 2 * d, d), pad, true, heads);
  (expected * weights).sum().backward();
  EXPECT_LT(max_diff(out, expected), 1e-12);
  EXPECT_LT(max_diff(qkv.grad(), ref_qkv.grad()), 1e-12);
}

// AttentionMask::per_sentence: a sentence padded in a batch gets, bit for bit, what it gets
// alone, in self- and cross-attention, at widths where BLAS blocks its sums; and the reference's
// values.
TEST(FusedAttention, PerSentenceAPaddedSentenceGetsItsResultsAlone) {
  torch::manual_seed(4);
  torch::NoGradGuard no_grad;
  const int64_t heads = 4, d = 256, width = 41;
  const std::vector<int64_t> lengths = {41, 5, 17, 30, 1, 33};
  const auto pad = padding(lengths, width);
  AttentionMask mask{pad, false};
  mask.per_sentence = true;
  const auto qkv = torch::randn({6, width, 3 * d});
  const auto q = torch::randn({6, 7, d}), kv = torch::randn({6, width, 2 * d});
  const auto self = fused_attention(qkv, torch::Tensor(), heads, mask);
  const auto cross = fused_attention(q, kv, heads, mask);
  for (size_t b = 0; b < lengths.size(); ++b) {
    const int64_t len = lengths[b];
    const auto i = static_cast<int64_t>(b);
    const auto no_pad = torch::zeros({1, len}, torch::kBool);
    const auto self_alone = fused_attention(qkv.narrow(0, i, 1).narrow(1, 0, len).contiguous(),
                                            torch::Tensor(), heads, AttentionMask{no_pad, false});
    EXPECT_TRUE(torch::equal(self[i].narrow(0, 0, len), self_alone[0])) << "self, sentence " << b;
    EXPECT_EQ(self[i].narrow(0, len, width - len).abs().sum().item<float>(), 0) << b;
    const auto cross_alone = fused_attention(q.narrow(0, i, 1),
                                             kv.narrow(0, i, 1).narrow(1, 0, len).contiguous(),
                                             heads, AttentionMask{no_pad, false});
    EXPECT_TRUE(torch::equal(cross[i], cross_alone[0])) << "cross, sentence " << b;
  }
  const auto expected = reference_attention(q.to(torch::kDouble), kv.narrow(2, 0, d).to(torch::kDouble),
                                            kv.narrow(2, d, d).to(torch::kDouble), pad, false, heads);
  EXPECT_LT(max_diff(cross.to(torch::kDouble), expected), 1e-5);
}

TEST(FusedAttention, CrossAttentionWithASentenceWithoutKeysEqualsReferenceWithGradients) {
  torch::manual_seed(2);
  const int64_t heads = 4, d = 8, q_len = 3, k_len = 5;
  const auto pad = padding({5, 0, 2}, k_len);  // sentence 1: every key is padding
  auto q = leaf(3, q_len, d);
  auto kv = leaf(3, k_len, 2 * d);
  const auto weights = torch::randn({3, q_len, d}, torch::kDouble);
  auto out = fused_attention(q, kv, heads, AttentionMask{pad, false});
  (out * weights).sum().backward();

  auto ref_q = q.detach().clone().requires_grad_(true);
  auto ref_kv = kv.detach().clone().requires_grad_(true);
  auto expected =
      reference_attention(ref_q, ref_kv.narrow(2, 0, d), ref_kv.narrow(2, d, d), pad, false, heads);
  (expected * weights).sum().backward();
  EXPECT_LT(max_diff(out, expected), 1e-12);
  EXPECT_LT(max_diff(q.grad(), ref_q.grad()), 1e-12);
  EXPECT_LT(max_diff(kv.grad(), ref_kv.grad()), 1e-12);
  EXPECT_EQ(q.grad()[1].abs().max().item<double>(), 0.0);  // constant scores: no gradient
}

TEST(FusedAttention, FloatMatchesDoubleWithoutMask) {
  torch::manual_seed(3);
  auto q = torch::randn({2, 4, 16}, torch::kDouble);
  auto kv = torch::randn({2, 7, 32}, torch::kDouble);
  auto in_double = fused_attention(q, kv, 4, AttentionMask{});
  auto in_float = fused_attention(q.to(torch::kFloat), kv.to(torch::kFloat), 4, AttentionMask{});
  EXPECT_LT(max_diff(in_float.to(torch::kDouble), in_double), 1e-5);
}

// Shapes step_attention is run at: 64-column heads (the presets'), 8-column heads (the smallest
// the AVX2 loop takes) and 6-column heads (the other path in any precision).
struct StepShape {
  int64_t d, heads;
};
const StepShape kStepShapes[] = {{128, 2}, {16, 2}, {12, 2}};

TEST(StepAttention, HypothesesOfASentenceAttendToItsPaddedEncoderSide) {
  torch::manual_seed(5);
  const int64_t sentences = 3, len = 11;  // 11 keys: a partial group of 8
  auto pad = padding({11, 5, 0}, len);    // sentence 2: every key is padding
  pad[1][2] = true;                       // and sentence 1 a hidden key between visible ones
  // Widths: one row per sentence (greedy), 4 (the loop's rows at a time) and 7 (4 + 3).
  for (const int64_t width : {1, 4, 7}) {
    for (const auto dtype : {torch::kFloat, torch::kDouble}) {
      for (const auto& [d, heads] : kStepShapes) {
        const auto q = torch::randn({sentences * width, d}, dtype);
        const auto kv = torch::randn({sentences, len, 2 * d}, dtype);
        const auto out = step_attention(q, kv, len, width, pad, heads);
        const auto kvd = kv.to(torch::kDouble);
        const auto expected =
            reference_attention(q.to(torch::kDouble).view({sentences, width, d}),
                                kvd.narrow(2, 0, d), kvd.narrow(2, d, d), pad, false, heads)
                .view({sentences * width, d});
        EXPECT_LT(max_diff(out.to(torch::kDouble), expected), dtype == torch::kFloat ? 2e-6 : 1e-12)
            << "d " << d << ", heads " << heads << ", " << dtype << ", width " << width;
      }
    }
  }
}

TEST(StepAttention, EachRowReadsItsPositionsFromTheCacheRowsItsTableNames) {
  torch::manual_seed(6);
  const int64_t rows = 5, allocated = 7, capacity = 20, len = 13;
  const auto table = torch::randint(0, allocated, {rows, capacity}, torch::kInt);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& [d, heads] : kStepShapes) {
      // Queries rows 3 d apart, as step_self passes them (the q of a q | k | v product).
      const auto q = torch::randn({rows, 3 * d}, dtype).narrow(1, 0, d);
      const auto cache = torch::randn({allocated, capacity, 2 * d}, dtype);
      // Row r's own keys and values, gathered position by position.
      auto mine = torch::empty({rows, len, 2 * d}, torch::kDouble);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < len; ++j) {
          mine[r][j] = cache[table[r][j].item<int64_t>()][j].to(torch::kDouble);
        }
      }
      const auto expected =
          reference_attention(q.to(torch::kDouble).reshape({rows, 1, d}), mine.narrow(2, 0, d),
                              mine.narrow(2, d, d), padding(std::vector<int64_t>(rows, len), len),
                              false, heads)
              .view({rows, d});
      const auto out = step_attention(q, cache, len, 1, torch::Tensor(), heads, table);
      EXPECT_LT(max_diff(out.to(torch::kDouble), expected), dtype == torch::kFloat ? 2e-6 : 1e-12)
          << "d " << d << ", heads " << heads << ", " << dtype;
      // Without a table, row r's positions are its own cache row's.
      const auto own = cache.narrow(0, 0, rows).to(torch::kDouble);
      const auto plain =
          reference_attention(q.to(torch::kDouble).reshape({rows, 1, d}),
                              own.narrow(1, 0, len).narrow(2, 0, d),
                              own.narrow(1, 0, len).narrow(2, d, d),
                              padding(std::vector<int64_t>(rows, len), len), false, heads)
              .view({rows, d});
      const auto untabled =
          step_attention(q, cache.narrow(0, 0, rows), len, 1, torch::Tensor(), heads);
      EXPECT_LT(max_diff(untabled.to(torch::kDouble), plain), dtype == torch::kFloat ? 2e-6 : 1e-12)
          << "d " << d << ", heads " << heads << ", " << dtype;
    }
  }
}

// row_attention (int8 inference's attention): every real query of a padded sentence gets, bit
// for bit, what it gets alone, in the self-attention form (views of one q | k | v product) and the
// cross form, at the presets' 64-column heads and widths past BLAS's blocks; and the reference's
// values, padding queries included.
TEST(RowAttention, APaddedSentenceGetsItsBitsAloneAndTheReferenceValues) {
  torch::manual_seed(7);
  torch::NoGradGuard no_grad;
  const int64_t heads = 4, d = 256, width = 41;
  const std::vector<int64_t> lengths = {41, 5, 17, 30, 1, 33};
  const auto batch = static_cast<int64_t>(lengths.size());
  const auto pad = padding(lengths, width);
  const auto qkv = torch::randn({batch, width, 3 * d});
  const auto q = torch::randn({batch, 7, d}), kv = torch::randn({batch, width, 2 * d});
  const auto self = row_attention(qkv.narrow(2, 0, d), qkv.narrow(2, d, 2 * d), pad, heads);
  const auto cross = row_attention(q, kv, pad, heads);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lengths[b];
    const auto alone = qkv.narrow(0, b, 1).narrow(1, 0, len).contiguous();
    const auto self_alone =
        row_attention(alone.narrow(2, 0, d), alone.narrow(2, d, 2 * d), torch::Tensor(), heads);
    EXPECT_TRUE(torch::equal(self[b].narrow(0, 0, len), self_alone[0])) << "self, sentence " << b;
    const auto cross_alone = row_attention(q.narrow(0, b, 1),
                                           kv.narrow(0, b, 1).narrow(1, 0, len).contiguous(),
                                           torch::Tensor(), heads);
    EXPECT_TRUE(torch::equal(cross[b], cross_alone[0])) << "cross, sentence " << b;
  }
  const auto qkvd = qkv.to(torch::kDouble), kvd = kv.to(torch::kDouble);
  const auto self_expected = reference_attention(
      qkvd.narrow(2, 0, d), qkvd.narrow(2, d, d), qkvd.narrow(2, 2 * d, d), pad, false, heads);
  EXPECT_LT(max_diff(self.to(torch::kDouble), self_expected), 2e-6);
  const auto cross_expected = reference_attention(q.to(torch::kDouble), kvd.narrow(2, 0, d),
                                                  kvd.narrow(2, d, d), pad, false, heads);
  EXPECT_LT(max_diff(cross.to(torch::kDouble), cross_expected), 2e-6);
}

TEST(DropoutAdd, KeepsOrDropsEachElementAtRateAndGradientFollowsTheMask) {
  torch::manual_seed(4);
  const int64_t n = 200000;
  const double p = 0.1;
  auto x = torch::randn({n}, torch::kDouble).requires_grad_(true);
  auto residual = torch::randn({n}, torch::kDouble).requires_grad_(true);
  auto y = dropout_add(x, p, /*training=*/true, residual);
  const auto added = (y - residual).detach();
  const auto kept = added.ne(0);
  // Every element is either residual alone or residual + x / (1 - p).
  EXPECT_LT(max_diff(added.masked_select(kept), (x.detach() / (1 - p)).masked_select(kept)), 1e-12);
  const double dropped = 1.0 - kept.to(torch::kDouble).mean().item<double>();
  EXPECT_NEAR(dropped, p, 0.004);  // ~6 standard deviations at n = 200000

  const auto g = torch::randn({n}, torch::kDouble);
  (y * g).sum().backward();
  EXPECT_LT(max_diff(x.grad(), g * kept.to(torch::kDouble) / (1 - p)), 1e-12);
  EXPECT_LT(max_diff(residual.grad(), g), 0.0 + 1e-15);
}

TEST(DropoutAdd, SameSeedSameMaskAndEvaluationIsThePlainSum) {
  auto x = torch::ones({1000});
  torch::manual_seed(5);
  auto a = dropout_add(x, 0.3, true, torch::Tensor());
  torch::manual_seed(5);
  auto b = dropout_add(x, 0.3, true, torch::Tensor());
  auto c = dropout_add(x, 0.3, true, torch::Tensor());
  EXPECT_TRUE(a.equal(b));
  EXPECT_FALSE(a.equal(c));
  auto r = torch::randn({1000});
  EXPECT_TRUE(dropout_add(x, 0.3, false, r).equal(r + x));
}

}  // namespace
}  // namespace tandem::kernels
