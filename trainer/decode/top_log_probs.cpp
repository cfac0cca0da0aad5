#include "trainer/decode/top_log_probs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/decode/vector_math.h"

namespace tandem::decode {
namespace {

constexpr int64_t kBlock = 64;  // entries whose maximum is checked before any is looked at

// Row `x` of n logits → its k largest into value/token, best first (ties: lower index first);
// returns the row's maximum.
float top_of_row(const float* x, int64_t n, int64_t k, float* value, int64_t* token) {
  int64_t held = 0;
  float top = -INFINITY;
  for (int64_t begin = 0; begin < n; begin += kBlock) {
    const int64_t end = std::min(n, begin + kBlock);
    const float block_top = max_of(x + begin, end - begin);
    top = std::max(top, block_top);
    // Once k are held, a block none of whose entries beats the k-th is skipped whole.
    if (held == k && !(block_top > value[k - 1])) continue;
    for (int64_t j = begin; j < end; ++j) {
      const float v = x[j];
      if (held == k && !(v > value[k - 1])) continue;
      int64_t at = held < k ? held++ : k - 1;
      for (; at > 0 && value[at - 1] < v; --at) {
        value[at] = value[at - 1];
        token[at] = token[at - 1];
      }
      value[at] = v;
      token[at] = j;
    }
  }
  return top;
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> top_log_probs(const torch::Tensor& logits, int64_t k) {
  if (logits.dim() != 2 || k < 1 || k > logits.size(1)) {
    throw std::invalid_argument("top_log_probs: k = " + std::to_string(k) +
                                " for logits of shape " + std::to_string(logits.dim()) +
                                "-d [.., " + std::to_string(logits.size(-1)) + "]");
  }
  if (!logits.is_cpu() || logits.scalar_type() != torch::kFloat || !logits.is_contiguous()) {
    auto [value, token] = torch::log_softmax(logits, -1).topk(k, -1);
    return {value.to(torch::kFloat), token};
  }
  const int64_t rows = logits.size(0), n = logits.size(1);
  auto value = torch::empty({rows, k}, torch::kFloat);
  auto token = torch::empty({rows, k}, torch::kLong);
  const float* x = logits.data_ptr<float>();
  float* v = value.data_ptr<float>();
  int64_t* t = token.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * n;
    const float top = top_of_row(row, n, k, v + r * k, t + r * k);
    if (!std::isfinite(top)) {
      throw std::runtime_error("top_log_probs: row " + std::to_string(r) +
                               " of the logits is not finite (maximum " + std::to_string(top) +
                               ")");
    }
    // log_softmax(x)_j = (x_j - max) - log sum exp(x - max): x_j - max is exact for the best
    // entries, so large logits keep their precision.
    const float log_sum = std::log(exp_sum(row, n, top));
    for (int64_t i = 0; i < k; ++i) v[r * k + i] = (v[r * k + i] - top) - log_sum;
  }
  return {value, token};
}

}  // namespace tandem::decode
