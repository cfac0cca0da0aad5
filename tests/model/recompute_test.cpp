// Activation checkpointing (recompute.h): a model whose layers run again in the backward pass gives
// bitwise the gradients of the same model run once, with dropout on, for the parameters (into
// gradients already accumulated, their hooks called) and for the encoder's output; the random
// stream goes on afterwards as it would have. Also with guided alignment reading out one layer.
#include "trainer/model/recompute.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "trainer/model/lora.h"
#include "trainer/model/transformer.h"

namespace tandem::model {
namespace {

TransformerOptions options(bool pre_norm, bool recompute) {
  TransformerOptions o;
  o.vocab_size = 23;
  o.d_model = 16;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 3;
  o.d_ff = 32;
  o.dropout = 0.3;
  o.pre_norm = pre_norm;
  o.recompute_layers = recompute;
  return o;
}

struct Pass {
  std::map<std::string, torch::Tensor> grads;
  int64_t hooks = 0;     // gradient hooks that ran on the parameters
  double next_draw = 0;  // the CPU stream's next number after the passes
  torch::Tensor loss;
};

// Two micro-batches' forward and backward passes (the second accumulating into the first's
// gradients), from the same initial weights and dropout seed.
// With lora: adapters (their dropout 0.2, B drawn nonzero) beside every projection of a frozen
// model.
// With guided: the second decoder layer's first two heads learn links (that layer is then run
// once, the others recomputed).
Pass train_twice(bool pre_norm, bool recompute, bool lora = false, bool guided = false) {
  torch::manual_seed(3);
  Transformer model(options(pre_norm, recompute));
  if (lora) {
    add_adapters(model, {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"}, {4, 8, 0.2});
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      if (item.key().find("lora_b") != std::string::npos) item.value().normal_(0, 0.3);
    }
  }
  model->train();
  Pass pass;
  for (auto& p : model->parameters()) {
    if (!p.requires_grad()) continue;
    p.register_hook([&pass](const torch::Tensor& g) {
      ++pass.hooks;
      return g;
    });
  }
  torch::manual_seed(11);
  for (int micro = 0; micro < 2; ++micro) {
    const auto src = torch::randint(4, 23, {3, 7}, torch::kLong);
    const auto tgt = torch::randint(4, 23, {3, 6}, torch::kLong);
    const GuidedAlignment alignment{
        {1, 2}, 0.5, torch::tensor({{0, 0, 3}, {1, 2, 0}, {1, 2, 6}, {2, 4, 1}}, torch::kLong),
        torch::tensor({1.0F, 0.5F, 0.5F, 1.0F})};
    const auto loss = model->loss(src, tgt.narrow(1, 0, 5), tgt.narrow(1, 1, 5), 0.1,
                                  guided ? &alignment : nullptr);
    loss.loss_sum.backward();
    pass.loss = loss.loss_sum.detach();
  }
  for (const auto& item : model->named_parameters()) pass.grads[item.key()] = item.value().grad();
  pass.next_draw = torch::rand({1}).item<double>();
  return pass;
}

TEST(Recompute, RecomputedLayersGiveBitwiseTheGradientsOfLayersRunOnce) {
  for (const bool pre_norm : {false, true}) {
    const Pass once = train_twice(pre_norm, false);
    const Pass again = train_twice(pre_norm, true);
    EXPECT_TRUE(torch::equal(once.loss, again.loss)) << "pre_norm " << pre_norm;
    ASSERT_EQ(once.grads.size(), again.grads.size());
    for (const auto& [name, grad] : once.grads) {
      ASSERT_TRUE(again.grads.at(name).defined()) << name;
      EXPECT_TRUE(torch::equal(grad, again.grads.at(name))) << name << " pre_norm " << pre_norm;
    }
    EXPECT_EQ(once.hooks, again.hooks);
    EXPECT_EQ(once.next_draw, again.next_draw) << "the stream goes on as it would have";
  }
}

TEST(Recompute, WithGuidedAlignmentRecomputedLayersGiveBitwiseTheGradientsOfLayersRunOnce) {
  for (const bool lora : {false, true}) {
    const Pass once = train_twice(false, false, lora, true);
    const Pass again = train_twice(false, true, lora, true);
    const Pass unguided = train_twice(false, false, lora, false);
    EXPECT_TRUE(torch::equal(once.loss, again.loss)) << "lora " << lora;
    EXPECT_FALSE(torch::equal(once.loss, unguided.loss)) << "lora " << lora;
    for (const auto& [name, grad] : once.grads) {
      if (!grad.defined()) continue;  // a frozen base's
      EXPECT_TRUE(torch::equal(grad, again.grads.at(name))) << name << " lora " << lora;
    }
    EXPECT_EQ(once.next_draw, again.next_draw);
  }
}

TEST(Recompute, RecomputedLayersOfALoraModelGiveBitwiseTheGradientsOfLayersRunOnce) {
  for (const bool pre_norm : {false, true}) {
    const Pass once = train_twice(pre_norm, false, true);
    const Pass again = train_twice(pre_norm, true, true);
    EXPECT_TRUE(torch::equal(once.loss, again.loss)) << "pre_norm " << pre_norm;
    ASSERT_EQ(once.grads.size(), again.grads.size());
    int64_t adapters = 0;
    for (const auto& [name, grad] : once.grads) {
      if (!is_adapter_parameter(name)) {
        EXPECT_FALSE(grad.defined() || again.grads.at(name).defined()) << name;
        continue;
      }
      ++adapters;
      ASSERT_TRUE(grad.defined() && again.grads.at(name).defined()) << name;
      EXPECT_TRUE(torch::equal(grad, again.grads.at(name))) << name << " pre_norm " << pre_norm;
    }
    EXPECT_EQ(adapters, 2 * (2 * 6 + 3 * 10));
    EXPECT_EQ(once.hooks, again.hooks);
    EXPECT_EQ(once.next_draw, again.next_draw);
  }
}

// The gradient of the layer's inputs flows on: a layer of (x, memory) recomputed has the input
// gradients of the same function run once.
TEST(Recompute, InputGradientsFlowOnAndNoGradientModeRunsTheLayerOnce) {
  const auto weight = torch::randn({4, 4}, torch::requires_grad());
  int calls = 0;
  const LayerFunction layer = [&](const torch::Tensor& x, const torch::Tensor& memory) {
    ++calls;
    return torch::dropout(torch::tanh(x.matmul(weight) + memory), 0.5, true);
  };
  torch::manual_seed(5);
  const auto x = torch::randn({3, 4}, torch::requires_grad());
  const auto memory = torch::randn({3, 4}, torch::requires_grad());
  torch::manual_seed(8);
  layer(x, memory).sum().backward();
  const auto gx = x.grad().clone(), gm = memory.grad().clone(), gw = weight.grad().clone();
  x.mutable_grad().reset();
  memory.mutable_grad().reset();
  weight.mutable_grad().reset();
  calls = 0;
  torch::manual_seed(8);
  recomputed(layer, x, memory).sum().backward();
  EXPECT_EQ(calls, 2);
  EXPECT_TRUE(torch::equal(x.grad(), gx));
  EXPECT_TRUE(torch::equal(memory.grad(), gm));
  EXPECT_TRUE(torch::equal(weight.grad(), gw));
  calls = 0;
  torch::NoGradGuard no_grad;
  recomputed(layer, x, memory);
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace tandem::model
