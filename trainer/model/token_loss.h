// Token-level cross-entropy with optional label smoothing, summed (not averaged) so that data
// parallel ranks can normalise by the target-token count of the whole global batch.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "trainer/model/frozen_base.h"

namespace tandem::model {

struct TokenCounts {
  double nll_sum = 0;   // sum of -log p(target) over non-pad targets (no smoothing)
  int64_t tokens = 0;   // non-pad targets
  int64_t correct = 0;  // targets equal to the argmax prediction
};

// Reads [nll sum, tokens, correct] statistics (a TokenLoss's, or a sum of them) to the host.
TokenCounts read_token_counts(const torch::Tensor& stats);

struct TokenLoss {
  torch::Tensor loss_sum;  // scalar, differentiable: sum over non-pad targets of the smoothed loss
  // [nll sum, tokens, correct] in float64 on the logits' device, computed without waiting for it:
  // training adds these up on the device and reads them once a step.
  torch::Tensor stats;
  // Per target, in the order of the flattened targets: -log p(target) (no smoothing; 0 at
  // padding) and whether the argmax prediction is the target (false at padding). Figures per
  // sentence or per corpus add these up.
  torch::Tensor target_nll, target_correct;
  // Guided alignment (Transformer::loss with links): the summed alignment cross-entropy
  // (unweighted), a float64 scalar on the device; undefined otherwise.
  torch::Tensor alignment_sum;
  TokenCounts counts() const { return read_token_counts(stats); }  // on a GPU, waits for it
};

// logits [batch, len, vocab], targets [batch, len] int64 with kPadId at padding.
// Smoothed loss per token: (1 - eps) * nll + eps * mean over the vocabulary of -log p.
// Memory: backward() through loss_sum overwrites contiguous `logits` with their gradient (the
// largest tensor of a step is not held twice); read logits before backward(), not after. If
// another part of the graph also saved them, its backward fails loudly (version counter).
TokenLoss token_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                     double label_smoothing);

// token_loss(rows · weightᵀ + bias, targets) without the [tokens, vocab] logits: rows [..., d]
// (decoder states), weight [vocab, d] (as held: a frozen LoRA base's may be bf16 or int8), bias
// [vocab], targets [...]. A chunk of rows at a time,
// the forward pass computes the logits, the loss and the gradients of rows, weight and bias (under
// autocast, bf16 products with fp32 sums), so memory holds one chunk of logits and backward only
// scales the stored gradients. The output layer's loss in training (OutputProjection::loss);
// token_loss serves evaluation, on the logits OutputProjection::forward gives.
TokenLoss projected_token_loss(const torch::Tensor& rows, const HeldWeight& weight,
                               const torch::Tensor& bias, const torch::Tensor& targets,
                               double label_smoothing);

}  // namespace tandem::model
