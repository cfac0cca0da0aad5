// The loss and its gradient are computed a few rows of logits at a time, straight from the logits:
// the [tokens, vocab] log-probabilities and the smoothing terms never exist as whole tensors, and
// the backward writes the gradient over the logits themselves.
#include "trainer/train/loss.h"

#include <algorithm>

#include "trainer/model/transformer.h"

namespace tandem::train {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per chunk: about 1 MB of float logits on CPU (stays in cache across the chunk's passes);
// on accelerators large chunks, since each op is a kernel launch.
int64_t chunk_rows(const torch::Tensor& logits) {
  const int64_t elements = logits.is_cpu() ? (int64_t{1} << 18) : (int64_t{1} << 26);
  return std::max<int64_t>(1, elements / std::max<int64_t>(1, logits.size(1)));
}

// bf16 logits (autocast) are widened a chunk at a time: log-sum-exp over a vocabulary in bf16
// would lose the target's probability in rounding.
torch::ScalarType compute_type(const torch::Tensor& logits) {
  const auto type = logits.scalar_type();
  return type == torch::kBFloat16 || type == torch::kHalf ? torch::kFloat : type;
}

// Per row: log-sum-exp, the target's logit, the mean logit and the argmax.
struct RowStats {
  torch::Tensor lse, target_logit, mean_logit, argmax;
};

RowStats row_stats(const torch::Tensor& logits, const torch::Tensor& targets, bool need_mean) {
  const int64_t rows = logits.size(0), step = chunk_rows(logits);
  const auto options = logits.options().dtype(compute_type(logits));
  RowStats s{torch::empty({rows}, options), torch::empty({rows}, options),
             need_mean ? torch::empty({rows}, options) : torch::Tensor(),
             torch::empty({rows}, targets.options())};
  for (int64_t begin = 0; begin < rows; begin += step) {
    const int64_t n = std::min(step, rows - begin);
    const auto x = logits.narrow(0, begin, n).to(options.dtype());
    auto [top, index] = x.max(1, /*keepdim=*/true);
    auto lse = (x - top).exp_().sum(1, /*keepdim=*/true).log_().add_(top);
    s.lse.narrow(0, begin, n).copy_(lse.squeeze(1));
    s.argmax.narrow(0, begin, n).copy_(index.squeeze(1));
    s.target_logit.narrow(0, begin, n)
        .copy_(x.gather(1, targets.narrow(0, begin, n).unsqueeze(1)).squeeze(1));
    if (need_mean) s.mean_logit.narrow(0, begin, n).copy_(x.mean(1));
  }
  return s;
}

// Outputs: the smoothed loss sum (differentiable) and [nll sum, tokens, correct] (float64).
class TokenLossFunction : public torch::autograd::Function<TokenLossFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets, double smoothing) {
    const auto real = targets.ne(model::kPadId);
    const auto s = row_stats(logits, targets, smoothing > 0);
    const auto nll = (s.lse - s.target_logit).masked_fill_(~real, 0.0);
    auto loss = (1.0 - smoothing) * nll;
    if (smoothing > 0) loss += smoothing * (s.lse - s.mean_logit).masked_fill_(~real, 0.0);
    auto stats = torch::stack({nll.sum().to(torch::kFloat64), real.sum().to(torch::kFloat64),
                               (s.argmax.eq(targets) & real).sum().to(torch::kFloat64)});
    ctx->save_for_backward({logits, targets, s.lse, real});
    ctx->saved_data["smoothing"] = smoothing;
    ctx->mark_non_differentiable({stats});
    return {loss.sum(), stats};
  }

  // d loss / d logit_j = weight * (softmax_j - (1 - eps) [j = target] - eps / vocab), weight the
  // incoming gradient at real targets and 0 at padding.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &logits = saved[0], &targets = saved[1], &lse = saved[2], &real = saved[3];
    const double smoothing = ctx->saved_data["smoothing"].toDouble();
    const auto weight = (grads[0] * real.to(lse.scalar_type())).unsqueeze(1);  // [rows, 1]
    const bool widened = lse.scalar_type() != logits.scalar_type();
    // Each chunk of logits is read once, just before its gradient is written, so the gradient
    // can take the logits' place (see loss.h): one [tokens, vocab] tensor instead of two.
    auto grad = logits.is_contiguous() ? logits : torch::empty_like(logits);
    const int64_t rows = logits.size(0), step = chunk_rows(logits);
    const double uniform = smoothing / static_cast<double>(logits.size(1));
    for (int64_t begin = 0; begin < rows; begin += step) {
      const int64_t n = std::min(step, rows - begin);
      auto out = grad.narrow(0, begin, n);
      const auto w = weight.narrow(0, begin, n);
      auto g = widened ? logits.narrow(0, begin, n).to(lse.scalar_type())
                       : out.copy_(logits.narrow(0, begin, n));
      g.sub_(lse.narrow(0, begin, n).unsqueeze(1));
      g.exp_().mul_(w);
      if (uniform > 0) g.sub_(w * uniform);
      g.scatter_add_(1, targets.narrow(0, begin, n).unsqueeze(1), w * -(1.0 - smoothing));
      if (widened) out.copy_(g);
    }
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

TokenLoss token_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                     double label_smoothing) {
  const int64_t vocab = logits.size(-1);
  auto outputs =
      TokenLossFunction::apply(logits.reshape({-1, vocab}), targets.reshape({-1}), label_smoothing);
  const auto stats = outputs[1].cpu();  // the step's one host sync for the counts
  const auto* s = stats.data_ptr<double>();
  TokenLoss out;
  out.loss_sum = outputs[0];
  out.nll_sum = s[0];
  out.tokens = static_cast<int64_t>(s[1]);
  out.correct = static_cast<int64_t>(s[2]);
  return out;
}

}  // namespace tandem::train
