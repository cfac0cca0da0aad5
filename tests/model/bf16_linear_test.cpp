// Bf16Copy and Bf16Linear on the CPU: the copy is the parts' values rounded to bf16, made again
// only after a part changed; the layer's output and its fp32 gradients (stacked parts, with and
// without relu) against the same products in double with autograd. tests/gpu checks the GPU path.
#include "trainer/model/bf16_linear.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

namespace tandem::model {
namespace {

// Values that bf16 holds exactly, as fp32 leaves.
torch::Tensor bf16_exact(std::vector<int64_t> sizes, double scale) {
  return (torch::randn(sizes) * scale).to(torch::kBFloat16).to(torch::kFloat).requires_grad_(true);
}

double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().to(torch::kDouble), y = b.detach().to(torch::kDouble);
  return (x - y).norm().item<double>() / y.norm().item<double>();
}

TEST(Bf16Copy, HoldsThePartsInBf16AndIsMadeAgainOnlyAfterAChange) {
  torch::manual_seed(41);
  auto a = torch::randn({3, 4}).requires_grad_(true), b = torch::randn({2, 4}).requires_grad_(true);
  auto c = torch::randn({5}).requires_grad_(true);
  Bf16Copy copy({{a, b}, {c}});
  const auto first = copy.get();
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].scalar_type(), torch::kBFloat16);
  EXPECT_TRUE(torch::equal(first[0], torch::cat({a, b}).detach().to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(first[1], c.detach().to(torch::kBFloat16)));
  copy.get();
  EXPECT_EQ(copy.copies_made(), 1);  // nothing changed
  {
    torch::NoGradGuard no_grad;
    b.add_(1.0);  // as the optimizer updates a parameter: in place
  }
  const auto second = copy.get();
  EXPECT_EQ(copy.copies_made(), 2);
  EXPECT_TRUE(torch::equal(second[0].narrow(0, 3, 2), b.detach().to(torch::kBFloat16)));
  EXPECT_TRUE(torch::equal(second[0].narrow(0, 0, 3), a.detach().to(torch::kBFloat16)));
  copy.get();
  EXPECT_EQ(copy.copies_made(), 2);
}

// Three parts side by side (as q | k | v) and one alone with relu, against double autograd on the
// same (bf16-exact) values: the output within bf16 rounding, the gradients fp32 and near.
void expect_linear_matches_double(const std::vector<int64_t>& outs, bool relu) {
  torch::manual_seed(42);
  const int64_t in = 24;
  std::vector<torch::Tensor> weights, biases;
  for (int64_t out : outs) {
    weights.push_back(bf16_exact({out, in}, 0.3));
    biases.push_back(bf16_exact({out}, 0.5));
  }
  const auto x_values = (torch::randn({2, 7, in})).to(torch::kBFloat16);
  auto x = x_values.clone().requires_grad_(true);
  Bf16Linear linear(weights, biases);
  const auto y = linear(x, relu);
  int64_t total = 0;
  for (int64_t out : outs) total += out;
  ASSERT_EQ(y.sizes(), (std::vector<int64_t>{2, 7, total}));
  EXPECT_EQ(y.scalar_type(), torch::kBFloat16);
  const auto upstream = torch::randn({2, 7, total});
  (y.to(torch::kFloat) * upstream).sum().backward();

  std::vector<torch::Tensor> ref_weights, ref_biases;
  for (size_t i = 0; i < outs.size(); ++i) {
    ref_weights.push_back(weights[i].detach().to(torch::kDouble).requires_grad_(true));
    ref_biases.push_back(biases[i].detach().to(torch::kDouble).requires_grad_(true));
  }
  auto ref_x = x_values.to(torch::kDouble).requires_grad_(true);
  auto ref_y = torch::matmul(ref_x, torch::cat(ref_weights).t()) + torch::cat(ref_biases);
  if (relu) ref_y = ref_y.relu();
  (ref_y * upstream.to(torch::kDouble)).sum().backward();

  EXPECT_LT(relative_error(y, ref_y), 1e-2);
  EXPECT_LT(relative_error(x.grad(), ref_x.grad()), 2e-2);
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(weights[i].grad().scalar_type(), torch::kFloat);
    EXPECT_EQ(biases[i].grad().scalar_type(), torch::kFloat);
    EXPECT_LT(relative_error(weights[i].grad(), ref_weights[i].grad()), 2e-2) << "part " << i;
    EXPECT_LT(relative_error(biases[i].grad(), ref_biases[i].grad()), 2e-2) << "part " << i;
  }
}

TEST(Bf16Linear, StackedPartsMatchDoubleProductsAndTheirGradients) {
  expect_linear_matches_double({16, 16, 16}, /*relu=*/false);
}

TEST(Bf16Linear, ReluMatchesDoubleProductsAndTheirGradients) {
  expect_linear_matches_double({40}, /*relu=*/true);
}

TEST(Bf16Linear, AppliesOnlyToBf16OnAGpuWithGradients) {
  EXPECT_FALSE(bf16_linear_applies(torch::zeros({2, 3}, torch::kBFloat16)));  // on the CPU
  EXPECT_FALSE(bf16_linear_applies(torch::zeros({2, 3})));
}

}  // namespace
}  // namespace tandem::model
