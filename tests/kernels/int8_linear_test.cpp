// Int8Linear against the exact product in double: every output within the error that int8
// weights with one scale per row and int8 (or 7-bit) inputs with one scale per product allow, which
// a single scale for the whole weight would exceed on its small rows.
#include "trainer/kernels/cpu/int8_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace tandem::kernels {
namespace {

TEST(Int8Linear, StaysWithinTheQuantizationErrorOfEveryRowAndIsNotFloat) {
  torch::manual_seed(21);
  const int64_t in = 64, out = 48;
  // Rows from 1e-3 to 1 in magnitude: per-row scales matter.
  auto weight = torch::randn({out, in}) * torch::logspace(-3, 0, out).unsqueeze(1);
  auto bias = torch::randn({out});
  auto x = torch::randn({5, 7, in}) * 2 + 0.5;
  const Int8Linear linear(weight, bias);
  const auto y = linear(x).to(torch::kDouble);
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{5, 7, out}));

  const auto xd = x.reshape({-1, in}).to(torch::kDouble), wd = weight.to(torch::kDouble);
  const auto exact = torch::addmm(bias.to(torch::kDouble), xd, wd.t()).view({5, 7, out});
  // Rounding to the grid moves a weight by at most half its row's step (1/127 of its largest
  // magnitude) and an input by at most one step of the product's range (clamping at the top adds
  // the other half); the product's error is bounded by the sum over the row of those moves.
  const double levels = cpu_has_vnni() ? 255.0 : 127.0;
  const double x_step =
      (std::max(xd.max().item<double>(), 0.0) - std::min(xd.min().item<double>(), 0.0)) / levels;
  const auto w_step = wd.abs().amax(1) / 127.0;  // [out]
  const auto bound = torch::mm(xd.abs(), (w_step / 2).unsqueeze(0).expand({in, out})) +
                     x_step * (wd.abs().sum(1) + in * w_step / 2).unsqueeze(0) +
                     1e-5 * exact.view({-1, out}).abs() + 1e-5;
  const auto error = (y - exact).view({-1, out}).abs();
  EXPECT_TRUE(error.le(bound).all().item<bool>())
      << "largest excess " << (error - bound).max().item<double>();
  // Quantized, not a float product in disguise.
  EXPECT_GT(error.max().item<double>(), 1e-4);
  // And close for a layer of ordinary rows: relative error of a few percent at most.
  EXPECT_LT(((y - exact).abs().max() / exact.abs().max()).item<double>(), 0.05);
}

TEST(Int8Linear, CopiesTheWeightAtConstruction) {
  torch::manual_seed(22);
  auto weight = torch::randn({8, 16});
  auto bias = torch::zeros({8});
  const Int8Linear linear(weight, bias);
  const auto x = torch::randn({3, 16});
  const auto before = linear(x);
  weight.mul_(10);
  EXPECT_TRUE(torch::equal(linear(x), before));
}

}  // namespace
}  // namespace tandem::kernels
