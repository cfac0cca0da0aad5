// FrozenLinear in fp32 against a naive loop: with AVX2/FMA every output is, bit for bit, the
// in-order FMA chain over its row started from the bias (what the packed tiles compute), for row,
// column and depth counts on and off the tiles' and blocks' edges; without them it is BLAS, within
// float rounding. The weight is copied at construction, and leading dimensions are kept.
#include "trainer/model/frozen_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

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

TEST(FrozenLinear, RefusesInputOfTheWrongWidth) {
  const FrozenLinear linear(torch::randn({4, 8}), torch::zeros({4}), InferencePrecision::kFp32);
  EXPECT_THROW(linear(torch::randn({2, 7})), c10::Error);
}

}  // namespace
}  // namespace tandem::model
