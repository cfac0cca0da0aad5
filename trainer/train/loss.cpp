#include "trainer/train/loss.h"

#include "trainer/model/transformer.h"

namespace tandem::train {

TokenLoss token_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                     double label_smoothing) {
  const int64_t vocab = logits.size(-1);
  auto log_probs = torch::log_softmax(logits.reshape({-1, vocab}), -1);  // [tokens, vocab]
  auto flat_targets = targets.reshape({-1});
  auto mask = flat_targets.ne(model::kPadId);
  auto nll = -log_probs.gather(1, flat_targets.unsqueeze(1)).squeeze(1);  // [tokens]
  nll = nll.masked_fill(~mask, 0.0);

  TokenLoss out;
  if (label_smoothing > 0) {
    auto uniform = -log_probs.mean(-1).masked_fill(~mask, 0.0);
    out.loss_sum = ((1.0 - label_smoothing) * nll + label_smoothing * uniform).sum();
  } else {
    out.loss_sum = nll.sum();
  }
  torch::NoGradGuard no_grad;
  out.nll_sum = nll.sum().item<double>();
  out.tokens = mask.sum().item<int64_t>();
  out.correct = (log_probs.argmax(-1).eq(flat_targets) & mask).sum().item<int64_t>();
  return out;
}

}  // namespace tandem::train
