// Sampling the next token instead of searching for the best (tandem-decode --sampling): from the
// model's distribution at a temperature, whole or cut to the k most likely tokens (top-k) or to
// the fewest whose probabilities reach p (top-p, nucleus). Each sentence draws from a stream of
// its own, a hash of the seed, the sentence's index in the input and the step, so that what a
// line becomes depends on nothing else: not the batch, the thread, the rank or a restart.
// Back-translation by sampling (Edunov et al., 2018) is what it is for.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::decode {

enum class SamplingKind { kNone, kTopK, kTopP, kFull };

struct SamplingOptions {
  SamplingKind kind = SamplingKind::kNone;  // kNone: beam search
  int64_t k = 0;                            // top-k: at least 1
  double p = 1.0;                           // top-p: in (0, 1]
  double temperature = 1.0;                 // > 0: the log-probabilities are divided by it
  uint64_t seed = 1;
};

// "topk:K", "topp:P" or "full" (kind, k and p; the rest as given). std::invalid_argument naming
// the text for anything else, K below 1, or P outside (0, 1].
SamplingOptions parse_sampling(const std::string& text, SamplingOptions base = {});

// A number in [0, 1), uniform over draws: the `step`-th of stream `stream` under `seed`.
double sampling_uniform(uint64_t seed, int64_t stream, int64_t step);

// One draw per row of `log_probs` [rows, vocab] (normalised or not; -inf marks tokens never to
// draw, at least one per row must be finite), from softmax(log_probs / temperature) restricted as
// `options` says, with `u[row]` (sampling_uniform's) as the draw: the first token whose
// cumulative probability exceeds u times the total of those kept, in the order of their
// probabilities (ties: the lower id first) for top-k and top-p, of their ids for the whole
// distribution. → the tokens, one per row.
std::vector<int64_t> draw_tokens(const torch::Tensor& log_probs, const SamplingOptions& options,
                                 const std::vector<double>& u);

}  // namespace tandem::decode
