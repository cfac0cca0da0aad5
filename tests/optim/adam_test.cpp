#include "trainer/optim/adam.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

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

TEST(ClipGrads, GlobalNormIsTheNormOfAllGradientsTogether) {
  EXPECT_DOUBLE_EQ(global_grad_norm(params_with_grads_3_4_and_12()), 13.0);  // sqrt(9+16+144)
  EXPECT_EQ(global_grad_norm({}), 0.0);
}

TEST(ClipGrads, GlobalNormAccumulatesInFloat64) {
  // 1e20^2 overflows float32; the float64 sum does not.
  torch::Tensor a = torch::zeros({2}).requires_grad_();
  a.mutable_grad() = torch::tensor({1e20f, 1e20f});
  EXPECT_NEAR(global_grad_norm({a}), std::sqrt(2.0) * 1e20, 1e6 * 1e20 * 1e-12);
}

TEST(ClipGrads, ScalesToMaxNormWhenAbove) {
  auto params = params_with_grads_3_4_and_12();
  clip_grads(params, 13.0, 6.5);  // scale 0.5
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::tensor({1.5f, 2.0f})));
  EXPECT_TRUE(torch::equal(params[1].grad(), torch::tensor({{6.0f}})));
  EXPECT_NEAR(global_grad_norm(params), 6.5, 1e-6);
}

TEST(ClipGrads, LeavesGradientsAloneAtOrBelowMaxNormOrWhenDisabled) {
  auto params = params_with_grads_3_4_and_12();
  clip_grads(params, 13.0, 13.0);
  clip_grads(params, 13.0, 20.0);
  clip_grads(params, 13.0, 0.0);
  clip_grads(params, std::nan(""), 1.0);
  EXPECT_TRUE(torch::equal(params[0].grad(), torch::tensor({3.0f, 4.0f})));
  EXPECT_TRUE(torch::equal(params[1].grad(), torch::tensor({{12.0f}})));
}

}  // namespace
}  // namespace tandem::optim
