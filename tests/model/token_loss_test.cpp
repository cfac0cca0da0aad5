// token_loss against the plain formulation (log_softmax over whole rows in double precision, with
// autograd): the loss sum with and without label smoothing, the counts, and the gradient of the
// logits, with padding, a scaled upstream gradient, and a vocabulary large enough to be chunked;
// projected_token_loss against token_loss of the product it fuses.
#include "trainer/model/token_loss.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "trainer/kernels/cpu/int8_linear.h"
#include "trainer/model/transformer.h"

namespace tandem::model {
namespace {

struct Case {
  torch::Tensor logits;   // [batch, len, vocab] double, requires grad
  torch::Tensor targets;  // [batch, len], padded with kPadId
};

Case make_case(int64_t vocab) {
  torch::manual_seed(7);
  auto targets = torch::randint(1, vocab, {3, 7}, torch::kLong);
  targets[0].slice(0, 4).fill_(kPadId);
  targets[2].slice(0, 1).fill_(kPadId);
  return {torch::randn({3, 7, vocab}, torch::kDouble).mul_(3).requires_grad_(true), targets};
}

// Sum over real targets of (1 - eps) (-log p_target) + eps * mean over the vocabulary of -log p.
torch::Tensor plain_loss(const torch::Tensor& logits, const torch::Tensor& targets, double eps) {
  const auto log_p = torch::log_softmax(logits, -1);
  const auto real = targets.ne(kPadId).to(torch::kDouble);
  const auto nll = -log_p.gather(-1, targets.unsqueeze(-1)).squeeze(-1);
  const auto uniform = -log_p.mean(-1);
  return (((1 - eps) * nll + eps * uniform) * real).sum();
}

void check(int64_t vocab, double eps, double upstream) {
  const auto c = make_case(vocab);
  // Copied first: backward() writes the gradient over the logits it was given.
  const auto logits = c.logits.detach().clone().requires_grad_(true);
  const auto loss = token_loss(c.logits, c.targets, eps);
  (loss.loss_sum * upstream).backward();

  const auto expected = plain_loss(logits, c.targets, eps);
  (expected * upstream).backward();
  EXPECT_NEAR(loss.loss_sum.item<double>(), expected.item<double>(), 1e-10);
  EXPECT_LT((c.logits.grad() - logits.grad()).abs().max().item<double>(), 1e-12);

  const auto real = c.targets.ne(kPadId);
  EXPECT_EQ(loss.counts().tokens, real.sum().item<int64_t>());
  EXPECT_NEAR(loss.counts().nll_sum, plain_loss(logits, c.targets, 0.0).item<double>(), 1e-10);
  int64_t correct = 0;
  for (int64_t b = 0; b < c.targets.size(0); ++b) {
    for (int64_t t = 0; t < c.targets.size(1); ++t) {
      const int64_t predicted = logits[b][t].argmax().item<int64_t>();
      correct += real[b][t].item<bool>() && predicted == c.targets[b][t].item<int64_t>();
    }
  }
  EXPECT_EQ(loss.counts().correct, correct);
}

TEST(TokenLoss, EqualsPlainFormulationWithoutSmoothing) { check(11, 0.0, 1.0); }

TEST(TokenLoss, EqualsPlainFormulationWithSmoothingAndScaledGradient) { check(11, 0.1, 0.37); }

TEST(TokenLoss, EqualsPlainFormulationWhenRowsAreChunked) { check(50000, 0.1, 1.0); }

// projected_token_loss against token_loss of the plain product, all in double: the loss, the
// counts, and the gradients of the rows, the weight and the bias (autograd through linear()).
void check_projected(int64_t rows, int64_t vocab, double eps, double upstream) {
  torch::manual_seed(5);
  const int64_t d = 8;
  auto targets = torch::randint(1, vocab, {rows}, torch::kLong);
  targets.slice(0, rows / 3, rows / 2).fill_(kPadId);
  auto make = [](torch::IntArrayRef shape) {
    return torch::randn(shape, torch::kDouble).requires_grad_(true);
  };
  auto h = make({rows, d}), w = make({vocab, d}), b = make({vocab});
  auto h2 = h.detach().clone().requires_grad_(true), w2 = w.detach().clone().requires_grad_(true),
       b2 = b.detach().clone().requires_grad_(true);

  const auto got =
      projected_token_loss(h.view({2, rows / 2, d}), {w, {}}, b, targets.view({2, rows / 2}), eps);
  (got.loss_sum * upstream).backward();
  const auto expected = token_loss(torch::nn::functional::linear(h2, w2, b2), targets, eps);
  (expected.loss_sum * upstream).backward();

  EXPECT_NEAR(got.loss_sum.item<double>(), expected.loss_sum.item<double>(), 1e-9);
  EXPECT_NEAR(got.counts().nll_sum, expected.counts().nll_sum, 1e-9);
  EXPECT_EQ(got.counts().tokens, expected.counts().tokens);
  EXPECT_EQ(got.counts().correct, expected.counts().correct);
  EXPECT_LT((h.grad() - h2.grad()).abs().max().item<double>(), 1e-10);
  EXPECT_LT((w.grad() - w2.grad()).abs().max().item<double>(), 1e-10);
  EXPECT_LT((b.grad() - b2.grad()).abs().max().item<double>(), 1e-10);
}

TEST(ProjectedTokenLoss, EqualsTokenLossOfTheProductWithGradients) {
  check_projected(12, 17, 0.0, 1.0);
}

TEST(ProjectedTokenLoss, EqualsTokenLossOfTheProductWithSmoothingAndScaledGradient) {
  check_projected(12, 17, 0.1, 0.37);
}

// 2^22 logits per chunk on CPU: 200 rows x 30000 words are two chunks.
TEST(ProjectedTokenLoss, EqualsTokenLossOfTheProductWhenRowsAreChunked) {
  check_projected(200, 30000, 0.1, 1.0);
}

// A frozen weight held in bf16 or int8 (a LoRA base) under double rows is widened 8,192
// vocabulary rows at a time (30,000: four blocks, the last partial): the loss and the rows'
// gradient are those of its values widened whole.
TEST(ProjectedTokenLoss, AFrozenNarrowWeightWidenedByBlocksEqualsItWidenedWhole) {
  torch::manual_seed(6);
  const int64_t rows = 12, vocab = 30000, d = 8;
  const auto targets = torch::randint(1, vocab, {rows}, torch::kLong);
  const auto full = torch::randn({vocab, d});
  const auto quantized = kernels::quantize_rows(full);
  const auto b = torch::randn({vocab}, torch::kDouble);
  for (const HeldWeight& w : {HeldWeight{full.to(torch::kBFloat16), {}},
                              HeldWeight{quantized.values, quantized.scales}}) {
    auto h = torch::randn({rows, d}, torch::kDouble).requires_grad_(true);
    auto h2 = h.detach().clone().requires_grad_(true);
    const auto got =
        projected_token_loss(h.view({2, rows / 2, d}), w, b, targets.view({2, rows / 2}), 0.1);
    got.loss_sum.backward();
    const auto expected =
        token_loss(torch::nn::functional::linear(h2, w.as(torch::kDouble), b), targets, 0.1);
    expected.loss_sum.backward();
    EXPECT_NEAR(got.loss_sum.item<double>(), expected.loss_sum.item<double>(), 1e-9);
    EXPECT_EQ(got.counts().correct, expected.counts().correct);
    EXPECT_LT((h.grad() - h2.grad()).abs().max().item<double>(), 1e-10);
  }
}

TEST(TokenLoss, ArgmaxPredictionsCountAsCorrect) {
  auto targets = torch::tensor({int64_t{2}, int64_t{5}, kPadId}).view({1, 3});
  auto logits = torch::zeros({1, 3, 6});
  logits[0][0][2] = 4.0;  // right
  logits[0][1][1] = 4.0;  // wrong
  logits[0][2][0] = 4.0;  // padding: not counted
  const auto loss = token_loss(logits, targets, 0.0);
  EXPECT_EQ(loss.counts().tokens, 2);
  EXPECT_EQ(loss.counts().correct, 1);
}

}  // namespace
}  // namespace tandem::model
