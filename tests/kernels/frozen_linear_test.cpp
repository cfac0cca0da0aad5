// FrozenLinear on every kernel path this CPU executes, against naive loops. fp32: on avx2 and
// avx512 every output is, bit for bit, the in-order FMA chain over its row started from the bias
// (what the packed tiles compute), for row, column and depth counts on and off the tiles' and
// blocks' edges; on the generic path it is BLAS, within float rounding. int8 (avx2, avx_vnni,
// avx512_vnni): bit for bit the quantized product computed by hand with integers.
// The weight is copied at construction, and leading dimensions are kept.
#include "trainer/kernels/cpu/frozen_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

namespace tandem::kernels {
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

// One test per kernel path (cpu_path.h), run where this CPU executes it and skipped with the reason
// where it does not.
class EveryPath : public ::testing::TestWithParam<CpuPath> {
 protected:
  void SetUp() override {
    if (!cpu_executes(GetParam())) {
      GTEST_SKIP() << "this CPU cannot execute " << cpu_path_name(GetParam()) << " (its highest is "
                   << cpu_path_name(cpu_best_path()) << ")";
    }
  }
};

std::string path_name(const ::testing::TestParamInfo<CpuPath>& info) {
  return cpu_path_name(info.param);
}

class Fp32Path : public EveryPath {};
class Int8Path : public EveryPath {};

INSTANTIATE_TEST_SUITE_P(FrozenLinear, Fp32Path,
                         ::testing::Values(CpuPath::kGeneric, CpuPath::kAvx2, CpuPath::kAvx512),
                         path_name);
INSTANTIATE_TEST_SUITE_P(FrozenLinear, Int8Path,
                         ::testing::Values(CpuPath::kAvx2, CpuPath::kAvxVnni, CpuPath::kAvx512Vnni),
                         path_name);

TEST_P(Fp32Path, IsTheInOrderProductForEveryShape) {
  torch::manual_seed(41);
  // Rows: one, a tile's 6 and either side, past one block of rows (120 at in = 1030). Columns:
  // under, at and past a 16- and a 32-column panel. Depth: tiny, odd, the model's, and 1030: five
  // passes of 256 inputs, the last 6, each continuing the sums the one before left in y.
  for (const int64_t in : {1, 3, 64, 256, 1030}) {
    for (const int64_t out : {1, 15, 16, 17, 33, 40}) {
      for (const int64_t rows : {1, 5, 6, 7, 13, 100, 197, 400}) {
        const auto what =
            std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out);
        auto weight = torch::randn({out, in}), bias = torch::randn({out});
        auto x = torch::randn({rows, in});
        const FrozenLinear linear(weight, bias, InferencePrecision::kFp32, GetParam());
        ASSERT_EQ(linear.path(), GetParam());
        const auto y = linear(x);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, out})) << what;
        const auto expected = fma_chain(x, weight, bias);
        if (GetParam() != CpuPath::kGeneric) {
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

// The int8 scheme by hand: input row r scaled by L / max|x_r| (L = `levels`: 127, or 63 on avx2)
// and rounded to nearest even, weight row o by 127 / max|w_o| (each all-zero row: scale 1), the
// integer products summed exactly, then y = (sum · w scale_o) · x scale_r + bias_o, in float.
torch::Tensor int8_by_hand(const torch::Tensor& x, const torch::Tensor& weight,
                           const torch::Tensor& bias, float levels) {
  const int64_t rows = x.size(0), in = x.size(1), out = weight.size(0);
  auto quantize = [&](const float* row, int64_t n, std::vector<int64_t>& q, bool divide,
                      float steps) {
    float top = 0;
    for (int64_t k = 0; k < n; ++k) top = std::max(top, std::fabs(row[k]));
    const float inv = top > 0 ? steps / top : 1.0F, scale = top > 0 ? top / steps : 1.0F;
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
    const float ws = quantize(wc.data_ptr<float>() + o * in, in, qw, true, 127.0F);
    for (int64_t r = 0; r < rows; ++r) {
      const float xs = quantize(xc.data_ptr<float>() + r * in, in, qx, false, levels);
      int64_t sum = 0;
      for (int64_t k = 0; k < in; ++k) sum += qx[k] * qw[k];
      ya[r][o] = std::fma(static_cast<float>(sum) * ws, xs, bias[o].item<float>());
    }
  }
  return y;
}

TEST_P(Int8Path, IsTheQuantizedProductForEveryShape) {
  torch::manual_seed(43);
  // Rows past a tile of 4 or 6, in panels of up to 2 tiles (their fetches spread) and more, and
  // past a block (120 at in = 1030); columns under, at and past a 16- and a 32-column panel; depth
  // not a multiple of 4 or 32.
  for (const int64_t in : {1, 3, 64, 256, 1030}) {
    for (const int64_t out : {1, 15, 17, 31, 32, 33, 70}) {
      for (const int64_t rows : {1, 3, 5, 7, 13, 100, 400}) {
        const auto what =
            std::to_string(rows) + " x " + std::to_string(in) + " -> " + std::to_string(out);
        auto weight = torch::randn({out, in}), bias = torch::randn({out});
        auto x = torch::randn({rows, in});
        weight[out / 2].zero_();  // an all-zero weight row and input row: scale 1
        x[rows / 2].zero_();
        const FrozenLinear linear(weight, bias, InferencePrecision::kInt8, GetParam());
        ASSERT_EQ(linear.path(), GetParam());
        const auto y = linear(x);
        ASSERT_EQ(y.sizes(), (std::vector<int64_t>{rows, out})) << what;
        const auto expected = int8_by_hand(x, weight, bias, linear.input_levels());
        ASSERT_TRUE(torch::equal(y, expected))
            << what << ": largest difference " << (y - expected).abs().max().item<double>();
        // And near the float product: each of the `in` terms off by at most half a step of x
        // times |w|, half a step of w times |x| and a quarter of both steps.
        const auto exact = torch::addmm(bias, x, weight.t());
        const auto x_step = x.abs().amax(1, true) / linear.input_levels();
        const auto w_step = weight.abs().amax(1) / 127;
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

TEST(FrozenLinear, RefusesInputOfTheWrongWidth) {
  const FrozenLinear linear(torch::randn({4, 8}), torch::zeros({4}), InferencePrecision::kFp32);
  EXPECT_THROW(linear(torch::randn({2, 7})), c10::Error);
}

}  // namespace
}  // namespace tandem::kernels
