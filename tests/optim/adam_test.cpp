#include "trainer/optim/adam.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optim/multi_tensor.h"

namespace tandem::optim {
namespace {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

NamedParams make_params(torch::ScalarType dtype) {
  torch::manual_seed(7);
  auto options = torch::TensorOptions().dtype(dtype);
  // Values in [1, 2) so relative comparisons are meaningful.
  return {{"encoder.weight", (torch::rand({4, 5}, options) + 1).requires_grad_()},
          {"encoder.bias", (torch::rand({5}, options) + 1).requires_grad_()}};
}

NamedParams clone_params(const NamedParams& params) {
  NamedParams copy;
  for (const auto& [name, p] : params) copy.emplace_back(name, p.detach().clone().requires_grad_());
  return copy;
}

// A gradient that depends on the parameter and the step, as training's would.
void set_grads(const NamedParams& params, int step) {
  for (const auto& [name, p] : params) {
    p.mutable_grad() = torch::sin(p.detach() * (step + 1)) * (name == "encoder.bias" ? 3.0 : 0.5);
  }
}

TEST(Adam, MatchesTorchAdamOverSeveralSteps) {
  NamedParams ours = make_params(torch::kFloat32);
  NamedParams theirs = clone_params(ours);
  Adam adam(ours, AdamOptions{0.9, 0.98, 1e-9});
  std::vector<torch::Tensor> their_tensors = {theirs[0].second, theirs[1].second};
  torch::optim::Adam reference(their_tensors,
                               torch::optim::AdamOptions(1e-2).betas({0.9, 0.98}).eps(1e-9));
  for (int step = 0; step < 6; ++step) {
    set_grads(ours, step);
    set_grads(theirs, step);
    adam.step(1e-2);
    reference.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_TRUE(torch::allclose(ours[i].second, theirs[i].second, /*rtol=*/1e-6, /*atol=*/0))
        << ours[i].first << "\n"
        << (ours[i].second - theirs[i].second).abs().max();
  }
  EXPECT_EQ(adam.step_count(), 6);
}

TEST(Adam, MatchesNaiveScalarLoop) {
  const double beta1 = 0.8, beta2 = 0.95, eps = 1e-8, lr = 0.05;
  std::vector<double> p = {0.5, -1.0, 2.0}, m(3, 0.0), v(3, 0.0);
  torch::Tensor param = torch::tensor(p, torch::kFloat64).requires_grad_();
  torch::Tensor frozen = torch::ones({2}, torch::kFloat64).requires_grad_();  // never has a grad
  Adam adam({{"p", param}, {"frozen", frozen}}, AdamOptions{beta1, beta2, eps});
  for (int t = 1; t <= 4; ++t) {
    std::vector<double> g(3);
    for (int i = 0; i < 3; ++i) g[i] = p[i] * t - 0.3 * i;
    param.mutable_grad() = torch::tensor(g, torch::kFloat64);
    adam.step(lr);
    for (int i = 0; i < 3; ++i) {
      m[i] = beta1 * m[i] + (1 - beta1) * g[i];
      v[i] = beta2 * v[i] + (1 - beta2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(beta1, t));
      const double v_hat = v[i] / (1 - std::pow(beta2, t));
      p[i] -= lr * m_hat / (std::sqrt(v_hat) + eps);
    }
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(param[i].item<double>(), p[i], 1e-14 * std::abs(p[i])) << "step " << t;
    }
  }
  EXPECT_TRUE(torch::equal(frozen, torch::ones({2}, torch::kFloat64)));
}

// The float update writes through pointers, out of autograd's sight: it counts its writes in the
// version counter, which is how what is derived from a parameter (bf16 copies) sees it change. A
// step the gate closes writes nothing and counts nothing.
TEST(Adam, CountsItsWritesInTheVersionCounterAndNoneForASkippedStep) {
  torch::Tensor param = torch::ones({4}).requires_grad_();
  Adam adam({{"p", param}}, AdamOptions{0.9, 0.98, 1e-8});
  param.mutable_grad() = torch::full({4}, 0.5);
  auto version = param._version();
  adam.step(0.1);
  EXPECT_GT(param._version(), version);
  EXPECT_LT(param[0].item<float>(), 1.0f);

  const auto after_first = param.detach().clone();
  param.mutable_grad() = torch::full({4}, std::nanf(""));
  version = param._version();
  adam.step(0.1, gate_gradients(adam.parameters(), 5.0));
  EXPECT_EQ(param._version(), version);
  EXPECT_TRUE(torch::equal(param, after_first));
}

TEST(Adam, SavedStateResumesBitExactly) {
  NamedParams params = make_params(torch::kFloat32);
  Adam adam(params, AdamOptions{});
  for (int step = 0; step < 3; ++step) {
    set_grads(params, step);
    adam.step(1e-3);
  }
  // Snapshot as a checkpoint would hold it: copies of parameters and state, and the step.
  NamedParams resumed = clone_params(params);
  auto saved = adam.state();
  for (auto& [group, tensors] : saved) {
    for (auto& named : tensors) named.second = named.second.clone();
  }
  for (int step = 3; step < 6; ++step) {
    set_grads(params, step);
    adam.step(1e-3);
  }
  Adam restored(resumed, AdamOptions{});
  restored.load_state(saved, 3);
  EXPECT_EQ(restored.step_count(), 3);
  for (int step = 3; step < 6; ++step) {
    set_grads(resumed, step);
    restored.step(1e-3);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::equal(params[i].second, resumed[i].second)) << params[i].first;
  }
  const auto a = adam.state(), b = restored.state();
  for (const char* group : {"exp_avg", "exp_avg_sq"}) {
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(torch::equal(a.at(group)[i].second, b.at(group)[i].second)) << group;
    }
  }
}

TEST(Adam, StateListsEveryParameterByNameInOrder) {
  NamedParams params = make_params(torch::kFloat32);
  Adam adam(params, AdamOptions{});
  const auto state = adam.state();
  ASSERT_EQ(state.size(), 2u);
  for (const auto& [group, tensors] : state) {
    ASSERT_EQ(tensors.size(), 2u) << group;
    EXPECT_EQ(tensors[0].first, "encoder.weight");
    EXPECT_EQ(tensors[1].first, "encoder.bias");
    EXPECT_EQ(tensors[0].second.sizes(), params[0].second.sizes());
    EXPECT_EQ(tensors[0].second.count_nonzero().item<int64_t>(), 0);
  }
}

std::string load_error(
    Adam& adam,
    const std::map<std::string, std::vector<std::pair<std::string, torch::Tensor>>>& state) {
  try {
    adam.load_state(state, 1);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Adam, LoadStateNamesTheParameterAtFault) {
  NamedParams params = make_params(torch::kFloat32);
  Adam adam(params, AdamOptions{});
  auto state = adam.state();
  state["exp_avg_sq"][1].second = torch::zeros({6});
  EXPECT_NE(load_error(adam, state).find("exp_avg_sq/encoder.bias: shape [6], expected [5]"),
            std::string::npos);
  state = adam.state();
  state["exp_avg"][0].first = "decoder.weight";
  EXPECT_NE(load_error(adam, state).find("exp_avg: parameter encoder.weight is missing"),
            std::string::npos);
  state = adam.state();
  state.erase("exp_avg_sq");
  EXPECT_NE(load_error(adam, state).find("group exp_avg_sq is missing"), std::string::npos);
  state = adam.state();
  state["exp_avg"].emplace_back("extra", torch::zeros({1}));
  EXPECT_NE(load_error(adam, state).find("exp_avg: 3 parameters, the model has 2"),
            std::string::npos);
}

TEST(Adam, ZeroGradKeepsTheBuffers) {
  NamedParams params = make_params(torch::kFloat32);
  set_grads(params, 0);
  const void* buffer = params[0].second.grad().data_ptr();
  Adam adam(params, AdamOptions{});
  adam.zero_grad();
  EXPECT_EQ(params[0].second.grad().data_ptr(), buffer);
  EXPECT_EQ(params[0].second.grad().abs().sum().item<float>(), 0.0f);
}

std::vector<torch::Tensor> params_with_grads_3_4_and_12() {
  torch::Tensor a = torch::zeros({2}).requires_grad_();
  torch::Tensor b = torch::zeros({1, 1}).requires_grad_();
  torch::Tensor no_grad = torch::zeros({3}).requires_grad_();
  a.mutable_grad() = torch::tensor({3.0f, 4.0f});
  b.mutable_grad() = torch::tensor({{12.0f}});
  return {a, b, no_grad};
}

double norm_of(const std::vector<torch::Tensor>& params) {
  return grad_norm(params).item<double>();
}

TEST(GradientGate, NormIsTheNormOfAllGradientsTogether) {
  EXPECT_DOUBLE_EQ(norm_of(params_with_grads_3_4_and_12()), 13.0);  // sqrt(9+16+144)
  EXPECT_EQ(norm_of({}), 0.0);
  // Float64 gradients take the tensor path; mixed with float ones the sum is the same.
  auto params = params_with_grads_3_4_and_12();
  params[1].mutable_grad() = params[1].grad().to(torch::kFloat64);
  EXPECT_DOUBLE_EQ(norm_of(params), 13.0);
  EXPECT_EQ(grad_norm(params).scalar_type(), torch::kFloat64);
}

TEST(GradientGate, NormAccumulatesInFloat64) {
  // 1e20^2 overflows float32; the float64 sum does not.
  torch::Tensor a = torch::zeros({2}).requires_grad_();
  a.mutable_grad() = torch::tensor({1e20f, 1e20f});
  EXPECT_NEAR(norm_of({a}), std::sqrt(2.0) * 1e20, 1e6 * 1e20 * 1e-12);
}

TEST(GradientGate, ScalesToMaxNormOnlyAboveIt) {
  const auto params = params_with_grads_3_4_and_12();
  const GradientGate half = gate_gradients(params, 6.5);
  EXPECT_EQ(half.norm.item<double>(), 13.0);
  EXPECT_EQ(half.scale.item<double>(), 0.5);
  EXPECT_TRUE(half.finite.item<bool>());
  for (double max_norm : {13.0, 20.0, 0.0}) {
    const GradientGate open = gate_gradients(params, max_norm);
    EXPECT_EQ(open.scale.item<double>(), 1.0) << max_norm;
    EXPECT_TRUE(open.finite.item<bool>()) << max_norm;
  }
  // The gate decides; the gradients themselves are left as they were.
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::tensor({3.0f, 4.0f})));
}

TEST(GradientGate, ANonFiniteNormClosesIt) {
  for (float bad : {std::nanf(""), INFINITY}) {
    auto params = params_with_grads_3_4_and_12();
    params[0].grad()[1] = bad;
    for (double max_norm : {1.0, 0.0}) {
      const GradientGate gate = gate_gradients(params, max_norm);
      EXPECT_FALSE(gate.finite.item<bool>()) << bad << " " << max_norm;
      EXPECT_EQ(gate.scale.item<double>(), 0.0) << bad << " " << max_norm;
    }
  }
}

// The clip factor applied inside the update equals scaling the gradients first (CPU loop).
TEST(Adam, AGateScalesTheGradientsAsScalingThemFirstWould) {
  NamedParams gated = make_params(torch::kFloat32);
  NamedParams scaled = clone_params(gated);
  Adam a(gated, AdamOptions{}), b(scaled, AdamOptions{});
  for (int step = 0; step < 4; ++step) {
    set_grads(gated, step);
    set_grads(scaled, step);
    std::vector<torch::Tensor> tensors = {gated[0].second, gated[1].second};
    const GradientGate gate = gate_gradients(tensors, 0.7);
    ASSERT_LT(gate.scale.item<double>(), 1.0);
    const float factor = static_cast<float>(gate.scale.item<double>());
    for (auto& [name, p] : scaled) p.mutable_grad().mul_(factor);
    a.step(1e-2, gate);
    b.step(1e-2);
  }
  for (size_t i = 0; i < gated.size(); ++i) {
    EXPECT_TRUE(torch::equal(gated[i].second, scaled[i].second)) << gated[i].first;
  }
}

// Snapshots of parameters and state, to compare bit for bit.
std::vector<torch::Tensor> snapshot(const NamedParams& params, const Adam& adam) {
  std::vector<torch::Tensor> all;
  for (const auto& [name, p] : params) all.push_back(p.detach().clone());
  for (const auto& [group, tensors] : adam.state()) {
    for (const auto& [name, t] : tensors) all.push_back(t.clone());
  }
  return all;
}

void expect_same(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << i;
}

TEST(Adam, AClosedGateChangesNothingTheStepCountIncluded) {
  NamedParams params = make_params(torch::kFloat32);
  Adam adam(params, AdamOptions{});
  set_grads(params, 0);
  adam.step(1e-2);
  const auto before = snapshot(params, adam);
  params[1].second.grad()[2] = std::nanf("");
  std::vector<torch::Tensor> tensors = {params[0].second, params[1].second};
  adam.step(1e-2, gate_gradients(tensors, 1.0));
  expect_same(snapshot(params, adam), before);
  EXPECT_EQ(adam.step_count(), 1);
}

// The update a GPU runs where fused Adam is missing, decided by tensors: run here on the CPU in
// float64 against the naive loop, through a clipped step and a skipped one whose gradients are NaN.
TEST(AdamMaskedUpdate, MatchesTheNaiveLoopThroughClippedAndSkippedSteps) {
  const double beta1 = 0.8, beta2 = 0.95, eps = 1e-8, lr = 0.05;
  std::vector<double> p = {0.5, -1.0, 2.0}, m(3, 0.0), v(3, 0.0);
  std::vector<torch::Tensor> params = {torch::tensor(p, torch::kFloat64),
                                       torch::ones({2}, torch::kFloat64)};
  std::vector<torch::Tensor> exp_avg = {torch::zeros({3}, torch::kFloat64),
                                        torch::zeros({2}, torch::kFloat64)};
  std::vector<torch::Tensor> exp_avg_sq = {torch::zeros({3}, torch::kFloat64),
                                           torch::zeros({2}, torch::kFloat64)};
  torch::Tensor step = torch::zeros({}, torch::kFloat32);
  int t = 0;
  // Steps 2 and 5 are skipped (NaN, then infinity), steps 3 and 4 clipped to half.
  for (int call = 1; call <= 6; ++call) {
    std::vector<double> g(3);
    for (int i = 0; i < 3; ++i) g[i] = p[i] * call - 0.3 * i;
    const bool skip = call == 2 || call == 5;
    const double scale = call == 3 || call == 4 ? 0.5 : 1.0;
    auto grad = torch::tensor(g, torch::kFloat64);
    if (skip) grad[1] = call == 2 ? NAN : INFINITY;
    const std::vector<torch::Tensor> grads = {grad, torch::Tensor()};  // the second has none
    const AdamUpdate u{beta1,
                       beta2,
                       eps,
                       lr,
                       torch::scalar_tensor(skip ? 0.0 : scale, torch::kFloat64),
                       torch::scalar_tensor(!skip, torch::kBool)};
    const std::vector<torch::Tensor> before = {params[0].clone(), exp_avg[0].clone(),
                                               exp_avg_sq[0].clone()};
    adam_masked_update(params, grads, exp_avg, exp_avg_sq, step, u);
    if (skip) {
      EXPECT_TRUE(torch::equal(params[0], before[0])) << call;
      EXPECT_TRUE(torch::equal(exp_avg[0], before[1])) << call;
      EXPECT_TRUE(torch::equal(exp_avg_sq[0], before[2])) << call;
    } else {
      ++t;
      for (int i = 0; i < 3; ++i) {
        const double gi = g[i] * scale;
        m[i] = beta1 * m[i] + (1 - beta1) * gi;
        v[i] = beta2 * v[i] + (1 - beta2) * gi * gi;
        p[i] -= lr * (m[i] / (1 - std::pow(beta1, t))) /
                (std::sqrt(v[i] / (1 - std::pow(beta2, t))) + eps);
      }
    }
    EXPECT_EQ(step.item<float>(), static_cast<float>(t)) << call;
    for (int i = 0; i < 3; ++i) {
      EXPECT_NEAR(params[0][i].item<double>(), p[i], 1e-13 * std::abs(p[i])) << "call " << call;
    }
  }
  EXPECT_TRUE(torch::equal(params[1], torch::ones({2}, torch::kFloat64)));  // no gradient
}

// A skipped first step (count 0) must not divide by 1 - beta^0 = 0.
TEST(AdamMaskedUpdate, ASkippedFirstStepLeavesEverythingAtItsStart) {
  std::vector<torch::Tensor> params = {torch::ones({4})};
  std::vector<torch::Tensor> exp_avg = {torch::zeros({4})}, exp_avg_sq = {torch::zeros({4})};
  torch::Tensor step = torch::zeros({}, torch::kFloat32);
  const AdamUpdate u{0.9,
                     0.98,
                     1e-9,
                     1e-3,
                     torch::scalar_tensor(0.0, torch::kFloat64),
                     torch::scalar_tensor(false, torch::kBool)};
  adam_masked_update(params, {torch::full({4}, NAN)}, exp_avg, exp_avg_sq, step, u);
  EXPECT_TRUE(torch::equal(params[0], torch::ones({4})));
  EXPECT_TRUE(torch::equal(exp_avg_sq[0], torch::zeros({4})));
  EXPECT_EQ(step.item<float>(), 0.0f);
}

// In float32 the masked tensor ops stay within rounding of the CPU loop.
TEST(AdamMaskedUpdate, StaysNearTheCpuLoopInFloat32) {
  NamedParams looped = make_params(torch::kFloat32);
  NamedParams masked = clone_params(looped);
  Adam adam(looped, AdamOptions{});
  std::vector<torch::Tensor> params = {masked[0].second.detach(), masked[1].second.detach()};
  std::vector<torch::Tensor> exp_avg, exp_avg_sq;
  for (const auto& p : params) {
    exp_avg.push_back(torch::zeros_like(p));
    exp_avg_sq.push_back(torch::zeros_like(p));
  }
  torch::Tensor step = torch::zeros({}, torch::kFloat32);
  for (int s = 0; s < 5; ++s) {
    set_grads(looped, s);
    set_grads(masked, s);
    std::vector<torch::Tensor> tensors = {looped[0].second, looped[1].second};
    const GradientGate gate = gate_gradients(tensors, 0.9);
    adam.step(1e-2, gate);
    const AdamUpdate u{AdamOptions{}.beta1, AdamOptions{}.beta2, AdamOptions{}.eps, 1e-2,
                       gate.scale,          gate.finite};
    adam_masked_update(params, {masked[0].second.grad(), masked[1].second.grad()}, exp_avg,
                       exp_avg_sq, step, u);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(torch::allclose(params[i], looped[i].second, 1e-5, 1e-7)) << i;
  }
  EXPECT_EQ(step.item<float>(), 5.0f);
}

TEST(Adam, LoadStateRefusesACountBeyondTheFloat32Range) {
  NamedParams params = make_params(torch::kFloat32);
  Adam adam(params, AdamOptions{});
  try {
    adam.load_state(adam.state(), (int64_t{1} << 24) + 1);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("step 16777217 outside [0, 16777216]"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::optim
