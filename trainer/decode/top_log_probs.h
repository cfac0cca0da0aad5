// A beam step's per-row candidates without the full log-softmax: for each row of the logits its
// k largest entries, as log-probabilities. One pass finds them with the row's maximum, a second
// sums exp(x - max) (vectorized); [rows, vocab] is read twice and never written.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace tandem::decode {

// logits [rows, vocab] float or double, on any device → (log-probabilities [rows, k] float,
// tokens [rows, k] int64), each row best first; equal to log_softmax(logits).topk(k) up to the
// rounding of the normaliser's sum (its terms are added in another order), ties going to the
// lower token. Contiguous CPU float logits take the fused loop, anything else LibTorch's ops.
std::pair<torch::Tensor, torch::Tensor> top_log_probs(const torch::Tensor& logits, int64_t k);

// An ensemble's k best continuations per row: the largest entries of
// sum_i weights[i] * log_softmax(logits[i]) (not renormalised), each model's term computed as the
// one-model function computes it, so weights 0.5/0.5 over one model's logits twice give exactly
// its log-probabilities. One model takes the function above (its weight is taken as 1).
std::pair<torch::Tensor, torch::Tensor> top_log_probs(const std::vector<torch::Tensor>& logits,
                                                      const std::vector<double>& weights,
                                                      int64_t k);

// The log-probabilities of the (rows[i], tokens[i]) entries of an ensemble's logits, computed as
// top_log_probs computes them (the same entry gets the same value from both): for the tokens a
// row must be able to take whether or not they are among its best. → [n] float on the CPU.
torch::Tensor log_probs_at(const std::vector<torch::Tensor>& logits,
                           const std::vector<double>& weights, const std::vector<int64_t>& rows,
                           const std::vector<int64_t>& tokens);

}  // namespace tandem::decode
