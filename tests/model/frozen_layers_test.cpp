// The network's layers frozen for decoding (FrozenLinear inside): the feed-forward in blocks of
// rows and with Marian's swish, against the unfrozen layer and the formula.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/model/layers.h"

namespace tandem::model {
namespace {

// The frozen feed-forward runs its rows a block at a time (128) through one hidden buffer: over
// several blocks and a partial one, each output row is what that row alone gives, bit for bit, and
// the unfrozen layer's within float rounding.
TEST(FrozenLinear, FrozenFeedForwardInBlocksIsEachRowAlone) {
  torch::manual_seed(44);
  FeedForward ffn(FeedForwardOptions{16, 64});
  ffn->eval();
  torch::NoGradGuard no_grad;
  const auto x = torch::randn({3, 100, 16});  // 300 rows: two whole blocks and 44 rows
  const auto unfrozen = ffn(x);
  ffn->freeze(kernels::InferencePrecision::kFp32);
  const auto frozen = ffn(x);
  ASSERT_EQ(frozen.sizes(), x.sizes());
  EXPECT_TRUE(torch::allclose(frozen, unfrozen, 1e-5, 1e-5));
  const auto rows = x.reshape({-1, 16}), out = frozen.reshape({-1, 16});
  for (const int64_t r : {0, 127, 128, 255, 256, 299}) {
    EXPECT_TRUE(torch::equal(out[r], ffn(rows.narrow(0, r, 1))[0])) << "row " << r;
  }
}

// Swish (Marian's activation): frozen or not, fc2(h * sigmoid(h)) with h = fc1(x), computed here
// from the weights; and its gradient through the unfrozen layer is autograd's of that formula.
TEST(FrozenLinear, SwishFeedForwardIsFc2OfHTimesSigmoidH) {
  torch::manual_seed(45);
  FeedForward ffn(FeedForwardOptions{16, 64, Activation::kSwish});
  ffn->eval();
  const auto x = torch::randn({2, 150, 16}, torch::requires_grad());
  const auto h = torch::matmul(x, ffn->fc1->weight.t()) + ffn->fc1->bias;
  const auto expected = torch::matmul(h * torch::sigmoid(h), ffn->fc2->weight.t()) + ffn->fc2->bias;
  const auto unfrozen = ffn(x);
  EXPECT_TRUE(torch::allclose(unfrozen, expected, 1e-5, 1e-5));
  const auto g = torch::randn_like(expected);
  const auto want = torch::autograd::grad({expected}, {x, ffn->fc1->weight}, {g}, true);
  const auto got = torch::autograd::grad({unfrozen}, {x, ffn->fc1->weight}, {g});
  EXPECT_TRUE(torch::allclose(got[0], want[0], 1e-5, 1e-5));
  EXPECT_TRUE(torch::allclose(got[1], want[1], 1e-4, 1e-5));
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(ffn(x), expected, 1e-5, 1e-5));  // in place without autograd
  ffn->freeze(kernels::InferencePrecision::kFp32);
  EXPECT_TRUE(torch::allclose(ffn(x), expected, 1e-5, 1e-5));
}

}  // namespace
}  // namespace tandem::model
