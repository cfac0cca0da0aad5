#include "trainer/optim/ema.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

namespace tandem::optim {
namespace {

TEST(Ema, DecayWarmsUpThenHoldsAtTheConfiguredValue) {
  EXPECT_DOUBLE_EQ(Ema::decay_at(0.999, 0), 0.1);
  EXPECT_DOUBLE_EQ(Ema::decay_at(0.999, 1), 2.0 / 11.0);
  EXPECT_DOUBLE_EQ(Ema::decay_at(0.999, 90), 91.0 / 100.0);
  EXPECT_DOUBLE_EQ(Ema::decay_at(0.9, 90), 0.9);
  EXPECT_DOUBLE_EQ(Ema::decay_at(0.999, 1000000), 0.999);
}

// The average over several updates of moving parameters against a scalar loop in double.
TEST(Ema, FollowsTheParametersAsANaiveLoopDoes) {
  torch::manual_seed(3);
  torch::Tensor w = torch::rand({3, 4}), b = torch::rand({4});
  Ema ema({{"w", w}, {"b", b}}, 0.5);
  std::vector<double> expected_w(12), expected_b(4);
  for (int i = 0; i < 12; ++i) expected_w[i] = w.view(-1)[i].item<double>();
  for (int i = 0; i < 4; ++i) expected_b[i] = b[i].item<double>();
  for (int step = 1; step <= 7; ++step) {
    {
      torch::NoGradGuard no_grad;
      w.add_(torch::sin(w * step));
      b.mul_(0.5 + 0.1 * step);
    }
    ema.update(step);
    const double d = (1.0 + step) / (10.0 + step);  // below 0.5 for all 7 steps: still warming up
    for (int i = 0; i < 12; ++i)
      expected_w[i] = d * expected_w[i] + (1 - d) * w.view(-1)[i].item<double>();
    for (int i = 0; i < 4; ++i) expected_b[i] = d * expected_b[i] + (1 - d) * b[i].item<double>();
  }
  const torch::Tensor got_w = ema.averages()[0].second, got_b = ema.averages()[1].second;
  EXPECT_EQ(ema.averages()[0].first, "w");
  for (int i = 0; i < 12; ++i) EXPECT_NEAR(got_w.view(-1)[i].item<double>(), expected_w[i], 1e-5);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(got_b[i].item<double>(), expected_b[i], 1e-5);
  // The average lags: it is not the parameters themselves.
  EXPECT_FALSE(torch::equal(got_w, w));
}

// A step the gate skipped (GradientGate::finite false) leaves the averages bit for bit; the next
// taken one moves them as an update without the flag does.
TEST(Ema, AStepNotTakenLeavesTheAveragesAlone) {
  torch::manual_seed(5);
  torch::Tensor w = torch::randn({4, 3});
  torch::Tensor twin = w.clone();
  Ema ema({{"w", w}}, 0.9), reference({{"w", twin}}, 0.9);
  {
    torch::NoGradGuard no_grad;
    w.mul_(2);
    twin.mul_(2);
  }
  const torch::Tensor before = ema.averages()[0].second.clone();
  ema.update(1, torch::scalar_tensor(false, torch::kBool));
  EXPECT_TRUE(torch::equal(ema.averages()[0].second, before));
  ema.update(2, torch::scalar_tensor(true, torch::kBool));
  reference.update(2);
  EXPECT_TRUE(torch::equal(ema.averages()[0].second, reference.averages()[0].second));
  EXPECT_FALSE(torch::equal(ema.averages()[0].second, before));
}

TEST(Ema, SwappingTwiceRestoresBothBitForBit) {
  torch::manual_seed(4);
  torch::Tensor w = torch::randn({5, 6});
  Ema ema({{"w", w}}, 0.9);
  {
    torch::NoGradGuard no_grad;
    w.mul_(3);
  }
  ema.update(100);
  const torch::Tensor params = w.clone(), averages = ema.averages()[0].second.clone();
  {
    AveragedWeights held(&ema);
    EXPECT_TRUE(torch::equal(w, averages));
    EXPECT_TRUE(torch::equal(ema.averages()[0].second, params));
  }
  EXPECT_TRUE(torch::equal(w, params));
  EXPECT_TRUE(torch::equal(ema.averages()[0].second, averages));
}

TEST(Ema, ResetSetsTheAveragesOnly) {
  torch::Tensor w = torch::zeros({2, 3});
  Ema ema({{"w", w}}, 0.9);
  torch::Tensor average = ema.averages()[0].second;  // the live buffer
  average.fill_(1);
  EXPECT_TRUE(torch::equal(ema.averages()[0].second, torch::ones({2, 3})));
  EXPECT_TRUE(torch::equal(w, torch::zeros({2, 3})));  // the parameters are not touched
  ema.reset();
  EXPECT_TRUE(torch::equal(ema.averages()[0].second, w));
  EXPECT_THROW(Ema({{"w", w}}, 1.0), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::optim
