// The loss and its gradient are computed a few rows of logits at a time: the [tokens, vocab]
// log-probabilities and the smoothing terms never exist as whole tensors. token_loss writes the
// gradient over the logits; projected_token_loss never holds more than one chunk of logits.
#include "trainer/model/token_loss.h"

#include <algorithm>

#include "trainer/common/token_ids.h"
#include "trainer/model/autocast.h"
#include "trainer/kernels/cuda/gpu_ops.h"

namespace tandem::model {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Rows per chunk of `elements_per_chunk` logits at most: on CPU about 1 MB of floats for the
// loss alone (stays in cache across its passes), 16 MB when the chunk's matrix products come
// first (large enough for the products to run at full speed); on accelerators large chunks,
// since each op is a kernel launch.
int64_t chunk_rows(const torch::Device& device, int64_t vocab, bool with_products) {
  const int64_t elements = !device.is_cpu() ? (int64_t{1} << 26)
                           : with_products  ? (int64_t{1} << 22)
                                            : (int64_t{1} << 18);
  return std::max<int64_t>(1, elements / std::max<int64_t>(1, vocab));
}

// A frozen weight held narrower than the rows (a bf16 or int8 LoRA base computed in float32) is
// widened this many vocabulary rows at a time (64 MB at width 2,048), never whole (2.1 GB for
// NLLB-200 3.3B's embedding); its row chunks are larger (logits of 2^26 elements, 256 MB), so that
// it is widened twice per 256 rows of a 256k vocabulary, not per 16.
constexpr int64_t kWidenedVocabRows = 8192;
constexpr int64_t kNarrowWeightChunk = int64_t{1} << 26;

// h [n, d] Wᵀ + b (b of h's type), W [V, d] widened to h's type a block of rows at a time.
torch::Tensor logits_by_blocks(const torch::Tensor& h, const HeldWeight& weight,
                               const torch::Tensor& bias) {
  const int64_t vocab = weight.values.size(0);
  auto logits = torch::empty({h.size(0), vocab}, h.options());
  for (int64_t v = 0; v < vocab; v += kWidenedVocabRows) {
    const int64_t m = std::min(kWidenedVocabRows, vocab - v);
    const auto block = weight.rows(v, m).as(h.scalar_type());
    logits.narrow(1, v, m).copy_(torch::addmm(bias.narrow(0, v, m), h, block.t()));
  }
  return logits;
}

// g [n, V] W, W widened to g's type a block of rows at a time.
torch::Tensor product_by_blocks(const torch::Tensor& g, const HeldWeight& weight) {
  const int64_t vocab = weight.values.size(0);
  auto out = torch::zeros({g.size(0), weight.values.size(1)}, g.options());
  for (int64_t v = 0; v < vocab; v += kWidenedVocabRows) {
    const int64_t m = std::min(kWidenedVocabRows, vocab - v);
    out.addmm_(g.narrow(1, v, m), weight.rows(v, m).as(g.scalar_type()));
  }
  return out;
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

  RowStats(int64_t rows, const torch::TensorOptions& options, const torch::Tensor& targets,
           bool need_mean)
      : lse(torch::empty({rows}, options)),
        target_logit(torch::empty({rows}, options)),
        mean_logit(need_mean ? torch::empty({rows}, options) : torch::Tensor()),
        argmax(torch::empty({rows}, targets.options())) {}

  // Rows begin.. of widened logits x [n, vocab].
  void fill(int64_t begin, const torch::Tensor& x, const torch::Tensor& targets) {
    const int64_t n = x.size(0);
    auto [top, index] = x.max(1, /*keepdim=*/true);
    auto row_lse = (x - top).exp_().sum(1, /*keepdim=*/true).log_().add_(top);
    lse.narrow(0, begin, n).copy_(row_lse.squeeze(1));
    argmax.narrow(0, begin, n).copy_(index.squeeze(1));
    target_logit.narrow(0, begin, n).copy_(x.gather(1, targets.unsqueeze(1)).squeeze(1));
    if (mean_logit.defined()) mean_logit.narrow(0, begin, n).copy_(x.mean(1));
  }

  // The same from rows begin.. of logits x [n, vocab] in one pass on a GPU (own_kernels_for(x));
  // with weight ([n] fp32), x then holds the gradient loss_gradient_ would give.
  void fill_on_gpu(int64_t begin, torch::Tensor& x, const torch::Tensor& targets,
                   const torch::Tensor& weight, double smoothing) {
    const int64_t n = x.size(0);
    const auto rows = [&](const torch::Tensor& t) {
      return t.defined() ? t.narrow(0, begin, n) : t;
    };
    kernels::token_loss_rows_(x, targets, weight, smoothing,
                     {rows(lse), rows(target_logit), rows(mean_logit), rows(argmax)});
  }
};

// x [n, vocab] widened logits → d loss / d x in place: weight * (softmax_j - (1 - eps) [j =
// target] - eps / vocab), weight [n, 1] the incoming gradient at real targets and 0 at padding.
void loss_gradient_(torch::Tensor& x, const torch::Tensor& lse, const torch::Tensor& targets,
                    const torch::Tensor& weight, double smoothing) {
  const double uniform = smoothing / static_cast<double>(x.size(1));
  x.sub_(lse.unsqueeze(1)).exp_().mul_(weight);
  if (uniform > 0) x.sub_(weight * uniform);
  x.scatter_add_(1, targets.unsqueeze(1), weight * -(1.0 - smoothing));
}

// Logits g of rows begin.. → their gradient in place (for incoming [rows, 1]: 1 at targets, 0
// at padding), in cache-sized parts for the loss's passes; fills s's statistics of those rows and
// adds the bias gradient to d_bias.
void logits_to_gradient(torch::Tensor& g, int64_t begin, const torch::Tensor& targets,
                        const torch::Tensor& incoming, double smoothing, RowStats& s,
                        torch::Tensor& d_bias) {
  const int64_t n = g.size(0);
  const int64_t part_rows = chunk_rows(g.device(), g.size(1), false);
  for (int64_t at = begin; at < begin + n; at += part_rows) {
    const int64_t m = std::min(part_rows, begin + n - at);
    auto part = g.narrow(0, at - begin, m);
    const auto t = targets.narrow(0, at, m);
    if (kernels::own_kernels_for(part)) {  // one read and one write of the part's logits
      s.fill_on_gpu(at, part, t, incoming.narrow(0, at, m).view({-1}), smoothing);
      d_bias.add_(kernels::column_sums(part));
      continue;
    }
    auto x = part.to(s.lse.scalar_type());  // part itself unless widened
    s.fill(at, x, t);
    loss_gradient_(x, s.lse.narrow(0, at, m), t, incoming.narrow(0, at, m), smoothing);
    d_bias.add_(x.sum(0));
    if (!x.is_same(part)) part.copy_(x);
  }
}

// The smoothed loss sum, [nll sum, tokens, correct] (float64), and per target its nll and
// whether the argmax is the target, from the row statistics.
variable_list loss_outputs(AutogradContext* ctx, const RowStats& s, const torch::Tensor& targets,
                           const torch::Tensor& real, double smoothing) {
  auto nll = (s.lse - s.target_logit).masked_fill_(~real, 0.0);
  auto loss = (1.0 - smoothing) * nll;
  if (smoothing > 0) loss += smoothing * (s.lse - s.mean_logit).masked_fill_(~real, 0.0);
  auto correct = s.argmax.eq(targets) & real;
  auto stats = torch::stack({nll.sum().to(torch::kFloat64), real.sum().to(torch::kFloat64),
                             correct.sum().to(torch::kFloat64)});
  ctx->mark_non_differentiable({stats, nll, correct});
  return {loss.sum(), stats, nll, correct};
}

// Outputs: the smoothed loss sum (differentiable), [nll sum, tokens, correct] (float64), and
// per target its nll and whether the argmax is the target.
class TokenLossFunction : public torch::autograd::Function<TokenLossFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& logits,
                               const torch::Tensor& targets, double smoothing) {
    const auto real = targets.ne(kPadId);
    const int64_t rows = logits.size(0);
    const int64_t step = chunk_rows(logits.device(), logits.size(1), false);
    const auto dtype = compute_type(logits);
    RowStats s(rows, logits.options().dtype(dtype), targets, smoothing > 0);
    for (int64_t begin = 0; begin < rows; begin += step) {
      const int64_t n = std::min(step, rows - begin);
      auto chunk = logits.narrow(0, begin, n);
      if (kernels::own_kernels_for(chunk)) {
        s.fill_on_gpu(begin, chunk, targets.narrow(0, begin, n), torch::Tensor(), smoothing);
      } else {
        s.fill(begin, chunk.to(dtype), targets.narrow(0, begin, n));
      }
    }
    ctx->save_for_backward({logits, targets, s.lse, real});
    ctx->saved_data["smoothing"] = smoothing;
    return loss_outputs(ctx, s, targets, real, smoothing);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &logits = saved[0], &targets = saved[1], &lse = saved[2], &real = saved[3];
    const double smoothing = ctx->saved_data["smoothing"].toDouble();
    const auto weight = (grads[0] * real.to(lse.scalar_type())).unsqueeze(1);  // [rows, 1]
    const bool widened = lse.scalar_type() != logits.scalar_type();
    // Each chunk of logits is read once, just before its gradient is written, so the gradient
    // can take the logits' place (see loss.h): one [tokens, vocab] tensor instead of two.
    auto grad = logits.is_contiguous() ? logits : torch::empty_like(logits);
    const int64_t rows = logits.size(0);
    const int64_t step = chunk_rows(logits.device(), logits.size(1), false);
    for (int64_t begin = 0; begin < rows; begin += step) {
      const int64_t n = std::min(step, rows - begin);
      auto out = grad.narrow(0, begin, n);
      if (kernels::own_kernels_for(out)) {
        if (!grad.is_same(logits)) out.copy_(logits.narrow(0, begin, n));
        kernels::token_loss_rows_(out, targets.narrow(0, begin, n), weight.narrow(0, begin, n).view({-1}),
                         smoothing, {});
        continue;
      }
      auto g = widened ? logits.narrow(0, begin, n).to(lse.scalar_type())
                       : out.copy_(logits.narrow(0, begin, n));
      loss_gradient_(g, lse.narrow(0, begin, n), targets.narrow(0, begin, n),
                     weight.narrow(0, begin, n), smoothing);
      if (widened) out.copy_(g);
    }
    return {grad, torch::Tensor(), torch::Tensor()};
  }
};

// The output projection and the loss, a chunk of rows at a time. The gradients of rows, weight
// and bias for an incoming gradient of 1 are computed in the forward pass, while each chunk's
// logits exist; backward only scales them (the loss sum is linear in its incoming gradient).
class ProjectedLossFunction : public torch::autograd::Function<ProjectedLossFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& weight,
                               const c10::optional<torch::Tensor>& scales,
                               const torch::Tensor& bias, const torch::Tensor& targets,
                               double smoothing) {
    const auto real = targets.ne(kPadId);
    const int64_t n_rows = rows.size(0), vocab = weight.size(0);
    // Under autocast the products run in bf16: the operands are cast once here, not per chunk.
    const bool low = autocast_enabled(rows.device());
    // A frozen weight (a LoRA base, maybe held in bf16 or int8) is computed with in the rows' type
    // and gets no gradient, nor does its bias; held narrower, it is widened by blocks (an int8
    // one even under autocast, where a whole bf16 copy would be wider than it).
    const bool frozen = !weight.requires_grad() && !bias.requires_grad();
    const HeldWeight held{weight, scales.value_or(torch::Tensor())};
    const bool by_blocks = frozen && (held.scales.defined() ||
                                      (!low && weight.scalar_type() != rows.scalar_type()));
    const int64_t step = by_blocks ? std::max<int64_t>(1, kNarrowWeightChunk / vocab)
                                   : chunk_rows(rows.device(), vocab, true);
    const auto cast = [&](const torch::Tensor& t) {
      return low ? t.to(torch::kBFloat16) : t.to(rows.scalar_type());
    };
    const auto h = cast(rows), b = cast(bias);
    const auto w = by_blocks ? torch::Tensor() : cast(weight);
    const auto dtype = compute_type(h);
    RowStats s(n_rows, rows.options().dtype(dtype), targets, smoothing > 0);
    auto d_rows = torch::empty_like(rows);
    auto d_weight = frozen ? torch::Tensor() : torch::zeros_like(weight);
    auto d_bias = torch::zeros_like(bias);
    const auto incoming = real.to(dtype).unsqueeze(1);  // d loss_sum / d row loss: 1 or 0
    for (int64_t begin = 0; begin < n_rows; begin += step) {
      const int64_t n = std::min(step, n_rows - begin);
      const auto h_c = h.narrow(0, begin, n);
      auto g = by_blocks ? logits_by_blocks(h_c, held, b) : torch::addmm(b, h_c, w.t());
      logits_to_gradient(g, begin, targets, incoming, smoothing, s, d_bias);
      d_rows.narrow(0, begin, n).copy_(by_blocks ? product_by_blocks(g, held) : torch::mm(g, w));
      if (frozen) continue;
      if (g.scalar_type() == d_weight.scalar_type()) {
        d_weight.addmm_(g.t(), h_c);
      } else {
        d_weight.add_(torch::mm(g.t(), h_c));  // bf16 product, summed over chunks in fp32
      }
    }
    if (frozen) d_bias = torch::Tensor();
    ctx->save_for_backward({d_rows, d_weight, d_bias});
    return loss_outputs(ctx, s, targets, real, smoothing);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto& g = grads[0];
    const auto scaled = [&](const torch::Tensor& t) { return t.defined() ? t * g : t; };
    return {saved[0] * g, scaled(saved[1]), torch::Tensor(), scaled(saved[2]), torch::Tensor(),
            torch::Tensor()};
  }
};

TokenLoss token_loss_from(const variable_list& outputs) {
  return {outputs[0], outputs[1], outputs[2], outputs[3], torch::Tensor()};
}

}  // namespace

TokenCounts read_token_counts(const torch::Tensor& stats) {
  const auto host = stats.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto* s = host.data_ptr<double>();
  return {s[0], static_cast<int64_t>(s[1]), static_cast<int64_t>(s[2])};
}

TokenLoss token_loss(const torch::Tensor& logits, const torch::Tensor& targets,
                     double label_smoothing) {
  const int64_t vocab = logits.size(-1);
  return token_loss_from(TokenLossFunction::apply(logits.reshape({-1, vocab}),
                                                  targets.reshape({-1}), label_smoothing));
}

TokenLoss projected_token_loss(const torch::Tensor& rows, const HeldWeight& weight,
                               const torch::Tensor& bias, const torch::Tensor& targets,
                               double label_smoothing) {
  return token_loss_from(ProjectedLossFunction::apply(rows.reshape({-1, rows.size(-1)}),
                                                      weight.values, weight.scales_input(), bias,
                                                      targets.reshape({-1}), label_smoothing));
}

}  // namespace tandem::model
