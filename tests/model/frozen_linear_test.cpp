// FrozenLinear in fp32 against a naive loop: with AVX2/FMA every output is, bit for bit, the
// in-order FMA chain over its row started from the bias (what the packed tiles compute), for row,
// column and depth counts on and off the tiles' and blocks' edges; without them it is BLAS, within
// float rounding. In int8 with AVX-512 VNNI, bit for bit the quantized product computed by hand.
// The weight is copied at construction, and leading dimensions are kept.
#include "trainer/model/frozen_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "trainer/model/layers.h"

namespace tandem::model {
namespace {

// y[r][o] = fma(x[r][in-1], w[o][in-1], ... fma(x[r][0], w[o][0], bias[o])), in float.
torch::Tensor fma_chain(const torch::Tensor& x, const torch::Tensor& weight,
                        const torch::Tensor& bias) {
  const int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
  auto y = torch::empty({rows, out});
  auto xa = x.accessor<float, 2>();
  auto wa = weight.accessor<float, 2>();
  auto ba = bias.accessor<float, 1>();
  auto ya = y.accessor<float, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < out; ++o) {
      float acc = ba[o];
      for (int64_t k = 0; k < in; ++k) acc = std::fma(xa[r][k], wa[o][k], acc);
      ya[r][o] = acc;
    }
  }
  return y;
}

TEST(FrozenLinear, Fp32IsTheInOrderProductForEveryShape) {
  torch::manual_seed(41);
  // Rows: one, a tile's 6 and either side, past one block of rows (384 at in = 256, 90 at 1030).
  // Columns: under, at and past a 16-column panel. Depth: tiny, odd, the model's.
  for (const int64_t in : {1, 3, 64, 256, 1030}) {
    for (const int64_t out : {1, 15, 16, 17, 40}) {
      for (const int64_t rows : {1, 5, 6, 7, 13, 100, 197, 400}) {
        const auto what =
            std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out);
        auto weight = torch::randn({out, in}), bias = torch::randn({out});
        auto x = torch::randn({rows, in});
        const FrozenLinear linear(weight, bias, InferencePrecision::kFp32);
        const auto y = linear(x);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, out})) << what;
        const auto expected = fma_chain(x, weight, bias);
        if (cpu_has_packed_fp32()) {
          ASSERT_TRUE(torch::equal(y, expected))
              << what << ": largest difference " << (y - expected).abs().max().item<double>();
        } else {
          // BLAS sums in its own order: within float rounding of the sum of magnitudes.
          const auto scale = torch::mm(x.abs(), weight.abs().t()) + bias.abs();
          ASSERT_TRUE((y - expected).abs().le(1e-5 * scale + 1e-6).all().item<bool>()) << what;
        }
      }
    }
  }
}

// The int8 scheme by hand: input row r scaled by 127 / max|x_r| and rounded to nearest even,
// weight row o by 127 / max|w_o| (each all-zero row: scale 1), the integer products summed
// exactly, then y = (sum · w scale_o) · x scale_r + bias_o, in float.
torch::Tensor int8_by_hand(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias) {
  const int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
  auto quantize = [&](const float* row, int64_t n, std::vector<int64_t>& q, bool divide) {
    float top = 0;
    for (int64_t k = 0; k < n; ++k) top = std::max(top, std::fabs(row[k]));
    const float inv = top > 0 ? 127.0F / top : 1.0F, scale = top > 0 ? top / 127.0F : 1.0F;
    q.resize(n);
    for (int64_t k = 0; k < n; ++k) {
      q[k] = static_cast<int64_t>(std::nearbyint(divide ? row[k] / scale : row[k] * inv));
    }
    return scale;
  };
  auto y = torch::empty({rows, out});
  auto ya = y.accessor<float, 2>();
  const auto xc = x.contiguous(), wc = weight.contiguous();
  std::vector<int64_t> qx, qw;
  for (int64_t o = 0; o < out; ++o) {
    const float ws = quantize(wc.data_ptr<float>() + o * in, in, qw, true);
    for (int64_t r = 0; r < rows; ++r) {
      const float xs = quantize(xc.data_ptr<float>() + r * in, in, qx, false);
      int64_t sum = 0;
      for (int64_t k = 0; k < in; ++k) sum += qx[k] * qw[k];
      ya[r][o] = std::fma(static_cast<float>(sum) * ws, xs, bias[o].item<float>());
    }
  }
  return y;
}

TEST(FrozenLinear, Int8IsTheQuantizedProductForEveryShape) {
  if (!cpu_has_packed_int8()) GTEST_SKIP() << "no AVX-512 VNNI: int8 is Int8Linear (its own test)";
  torch::manual_seed(43);
  // Rows past a tile and past a block (384 at in = 256 and 1030 bytes); columns under, at and
  // past a 32-column panel; depth not a multiple of 4 or 16.
  for (const int64_t in : {1, 3, 64, 256, 1030}) {
    for (const int64_t out : {1, 31, 32, 33, 70}) {
      for (const int64_t rows : {1, 5, 7, 13, 100, 400}) {
        const auto what =
            std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out);
        auto weight = torch::randn({out, in}), bias = torch::randn({out});
        auto x = torch::randn({rows, in});
        weight[out / 2].zero_();  // an all-zero weight row and input row: scale 1
        x[rows / 2].zero_();
        const FrozenLinear linear(weight, bias, InferencePrecision::kInt8);
        const auto y = linear(x);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, out})) << what;
        const auto expected = int8_by_hand(x, weight, bias);
        ASSERT_TRUE(torch::equal(y, expected))
            << what << ": largest difference " << (y - expected).abs().max().item<double>();
        // And near the float product: each of the `in` terms off by at most half a step of x
        // times |w|, half a step of w times |x| and a quarter of both steps.
        const auto exact = torch::addmm(bias, x, weight.t());
        const auto x_step = x.abs().amax(1, true) / 127, w_step = weight.abs().amax(1) / 127;
        const auto bound = 0.5 * x_step * weight.abs().sum(1) +
                           0.5 * x.abs().sum(1, true) * w_step + 0.25 * in * x_step * w_step +
                           1e-5 * (torch::mm(x.abs(), weight.abs().t()) + bias.abs()) + 1e-6;
        ASSERT_TRUE((y - exact).abs().le(bound).all().item<bool>()) << what;
      }
    }
  }
}

TEST(FrozenLinear, CopiesTheWeightAndKeepsLeadingDimensions) {
  torch::manual_seed(42);
  auto weight = torch::randn({24, 32}), bias = torch::randn({24});
  const FrozenLinear linear(weight, bias, InferencePrecision::kFp32);
  // A non-contiguous [2, 3, 32] input: its rows are read as they are laid out logically.
  const auto x = torch::randn({3, 2, 32}).transpose(0, 1);
  const auto before = linear(x);
  ASSERT_EQ(before.sizes(), (std::vector<int64_t>{2, 3, 24}));
  const auto expected = torch::addmm(bias, x.reshape({-1, 32}), weight.t()).view({2, 3, 24});
  EXPECT_TRUE(torch::allclose(before, expected, 1e-5, 1e-5));
  {
    torch::NoGradGuard no_grad;
    weight.mul_(2);
    bias.zero_();
  }
  EXPECT_TRUE(torch::equal(linear(x), before));
}

TEST(FrozenLinear, WritesIntoABlockOfALargerResultAsItReturns) {
  torch::manual_seed(43);
  for (const auto precision : {InferencePrecision::kFp32, InferencePrecision::kInt8}) {
    auto weight = torch::randn({40, 64}), bias = torch::randn({40});
    const FrozenLinear linear(weight, bias, precision);
    const auto x = torch::randn({13, 64});
    auto y = torch::full({20, 40}, 7.0F);
    linear(x, y.narrow(0, 5, 13));
    EXPECT_TRUE(torch::equal(y.narrow(0, 5, 13), linear(x)));
    EXPECT_TRUE(torch::equal(y.narrow(0, 0, 5), torch::full({5, 40}, 7.0F)));
    EXPECT_TRUE(torch::equal(y.narrow(0, 18, 2), torch::full({2, 40}, 7.0F)));
    EXPECT_THROW(linear(x, y.narrow(0, 0, 12)), c10::Error);                       // rows
    EXPECT_THROW(linear(x, torch::empty({13, 41}).narrow(1, 0, 40)), c10::Error);  // strided
  }
}

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
  ffn->freeze(InferencePrecision::kFp32);
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
  ffn->freeze(InferencePrecision::kFp32);
  EXPECT_TRUE(torch::allclose(ffn(x), expected, 1e-5, 1e-5));
}

TEST(FrozenLinear, RefusesInputOfTheWrongWidth) {
  const FrozenLinear linear(torch::randn({4, 8}), torch::zeros({4}), InferencePrecision::kFp32);
  EXPECT_THROW(linear(torch::randn({2, 7})), c10::Error);
}

}  // namespace
}  // namespace tandem::model
