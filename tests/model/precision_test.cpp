// bf16 matrix products on the CPU (train.precision bf16): the loss of bf16 logits against the
// plain double-precision formulation, and one forward/backward pass of a Transformer as the
// trainer runs it (fused projection and loss) under the CPU autocast guard against the same pass
// in fp32 (same weights, same batch, no dropout).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/model/autocast.h"
#include "trainer/model/token_loss.h"
#include "trainer/model/transformer.h"

namespace tandem::model {
namespace {

// Largest |a - b| relative to the largest |b|.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const auto ad = a.to(torch::kDouble), bd = b.to(torch::kDouble);
  return ((ad - bd).abs().max() / bd.abs().max()).item<double>();
}

TEST(Bf16Loss, WidenedLogitsGiveThePlainLossAndAGradientRoundedToBf16) {
  torch::manual_seed(3);
  const int64_t vocab = 3000;  // several chunks of rows
  auto targets = torch::randint(1, vocab, {4, 90}, torch::kLong);
  targets[1].slice(0, 50).fill_(kPadId);
  const auto logits16 = (torch::randn({4, 90, vocab}) * 4).to(torch::kBFloat16);
  // The reference sees exactly the bf16 values, in double.
  const auto ref = logits16.to(torch::kDouble).requires_grad_(true);
  const auto log_p = torch::log_softmax(ref, -1);
  const auto real = targets.ne(kPadId);
  const auto nll = -(log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * real).sum();
  nll.backward();

  const auto input = logits16.clone().requires_grad_(true);
  const auto loss = token_loss(input, targets, 0.0);
  loss.loss_sum.backward();
  EXPECT_EQ(loss.loss_sum.scalar_type(), torch::kFloat);
  EXPECT_NEAR(loss.loss_sum.item<double>(), nll.item<double>(), 1e-5 * nll.item<double>());
  EXPECT_NEAR(loss.counts().nll_sum, nll.item<double>(), 1e-5 * nll.item<double>());
  EXPECT_EQ(loss.counts().tokens, real.sum().item<int64_t>());
  ASSERT_EQ(input.grad().scalar_type(), torch::kBFloat16);
  // bf16 keeps 8 significant bits: each element within half a unit in the last place.
  const auto expected = ref.grad().to(torch::kFloat);
  const auto diff = (input.grad().to(torch::kFloat) - expected).abs();
  EXPECT_TRUE((diff <= expected.abs() * (1.0 / 256) + 1e-30).all().item<bool>());
}

model::TransformerOptions small_options() {
  model::TransformerOptions o;
  o.vocab_size = 300;
  o.d_model = 64;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 128;
  o.dropout = 0.0;
  return o;
}

struct Pass {
  double loss;
  std::vector<std::pair<std::string, torch::Tensor>> grads;
};

Pass forward_backward(model::Transformer& model, const torch::Tensor& src, const torch::Tensor& tgt,
                      bool bf16) {
  model->zero_grad();
  TokenLoss loss;
  {
    AutocastGuard autocast(bf16, torch::Device(torch::kCPU));
    // As the trainer does: the decoder states through the fused projection and loss.
    const auto tgt_in = tgt.narrow(1, 0, tgt.size(1) - 1);
    if (bf16) {
      EXPECT_EQ(model->forward(src, tgt_in).scalar_type(), torch::kBFloat16);
    }
    loss = model->loss(src, tgt_in, tgt.narrow(1, 1, tgt.size(1) - 1), 0.1);
  }
  loss.loss_sum.backward();
  Pass out{loss.loss_sum.item<double>(), {}};
  for (const auto& p : model->named_parameters())
    out.grads.emplace_back(p.key(), p.value().grad().clone());
  return out;
}

TEST(Bf16Autocast, TransformerPassMatchesFp32WithinBf16RoundingAndKeepsFp32Weights) {
  torch::manual_seed(11);
  model::Transformer model(small_options());
  model->train();
  auto src = torch::randint(4, 300, {6, 17}, torch::kLong);
  auto tgt = torch::randint(4, 300, {6, 15}, torch::kLong);
  src[2].slice(0, 9).fill_(kPadId);
  tgt[4].slice(0, 6).fill_(kPadId);

  const auto fp32 = forward_backward(model, src, tgt, false);
  const auto bf16 = forward_backward(model, src, tgt, true);
  EXPECT_FALSE(autocast_enabled(torch::Device(torch::kCPU)));  // the guard restored the state
  EXPECT_NEAR(bf16.loss, fp32.loss, 0.01 * fp32.loss);
  ASSERT_EQ(bf16.grads.size(), fp32.grads.size());
  for (size_t i = 0; i < fp32.grads.size(); ++i) {
    const auto& [name, expected] = fp32.grads[i];
    const auto& got = bf16.grads[i].second;
    EXPECT_EQ(got.scalar_type(), torch::kFloat);  // master weights' gradients stay fp32
    // A key bias shifts every score of a query equally, which softmax ignores: its gradient is
    // zero up to rounding in both runs, so there is nothing to compare.
    if (name.find("k_proj.bias") != std::string::npos) continue;
    const double cosine = torch::nn::functional::cosine_similarity(
                              got.flatten(), expected.flatten(),
                              torch::nn::functional::CosineSimilarityFuncOptions().dim(0))
                              .item<double>();
    EXPECT_GT(cosine, 0.99) << name;
    EXPECT_LT(relative_error(got, expected), 0.25) << name;
  }
  for (const auto& p : model->parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat);
}

}  // namespace
}  // namespace tandem::model
