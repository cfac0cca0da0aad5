#include "trainer/decode/top_log_probs.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/decode/ensemble.h"
#include "trainer/kernels/cpu/vector_math.h"

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
    const float block_top = kernels::max_of(x + begin, end - begin);
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

// For row `r` of logits `x` [.., n] with maximum `top`: log sum exp(x - top), so that
// log_softmax(x)_j = (x_j - top) - log_sum. x_j - top is exact for the best entries, so large
// logits keep their precision.
float log_sum(const float* x, int64_t n, float top, int64_t r) {
  if (!std::isfinite(top)) {
    throw std::runtime_error("top_log_probs: row " + std::to_string(r) +
                             " of the logits is not finite (maximum " + std::to_string(top) + ")");
  }
  return std::log(kernels::exp_sum(x, n, top));
}

void check_shape(const torch::Tensor& logits, int64_t k) {
  if (logits.dim() != 2 || k < 1 || k > logits.size(1)) {
    throw std::invalid_argument("top_log_probs: k = " + std::to_string(k) +
                                " for logits of shape " + std::to_string(logits.dim()) +
                                "-d [.., " + std::to_string(logits.size(-1)) + "]");
  }
}

bool fused(const torch::Tensor& logits) {
  return logits.is_cpu() && logits.scalar_type() == torch::kFloat && logits.is_contiguous();
}

}  // namespace

std::pair<torch::Tensor, torch::Tensor> top_log_probs(const torch::Tensor& logits, int64_t k) {
  check_shape(logits, k);
  if (!fused(logits)) {
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
    // The k best logits are the k best log-probabilities; the normaliser's pass comes after.
    const float top = top_of_row(row, n, k, v + r * k, t + r * k);
    const float norm = log_sum(row, n, top, r);
    for (int64_t i = 0; i < k; ++i) v[r * k + i] = (v[r * k + i] - top) - norm;
  }
  return {value, token};
}

std::pair<torch::Tensor, torch::Tensor> top_log_probs(const std::vector<torch::Tensor>& logits,
                                                      const std::vector<double>& weights,
                                                      int64_t k) {
  if (logits.empty() || logits.size() != weights.size()) {
    throw std::invalid_argument("top_log_probs: " + std::to_string(logits.size()) +
                                " logits tensors with " + std::to_string(weights.size()) +
                                " weights");
  }
  if (logits.size() == 1) return top_log_probs(logits.front(), k);
  bool all_fused = true;
  for (const auto& one : logits) {
    check_shape(one, k);
    if (!one.sizes().equals(logits.front().sizes())) {
      throw std::invalid_argument("top_log_probs: an ensemble's logits differ in shape");
    }
    all_fused = all_fused && fused(one);
  }
  if (!all_fused) {
    auto [value, token] = combine_log_probs(logits, weights).topk(k, -1);
    return {value, token};
  }
  const int64_t rows = logits.front().size(0), n = logits.front().size(1);
  auto value = torch::empty({rows, k}, torch::kFloat);
  auto token = torch::empty({rows, k}, torch::kLong);
  std::vector<float> combined(n);
  float* v = value.data_ptr<float>();
  int64_t* t = token.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    for (size_t i = 0; i < logits.size(); ++i) {
      const float* row = logits[i].data_ptr<float>() + r * n;
      const float top = kernels::max_of(row, n);
      const float norm = log_sum(row, n, top, r);
      const auto weight = static_cast<float>(weights[i]);
      float* out = combined.data();
      if (i == 0) {
        for (int64_t j = 0; j < n; ++j) out[j] = weight * ((row[j] - top) - norm);
      } else {
        for (int64_t j = 0; j < n; ++j) out[j] += weight * ((row[j] - top) - norm);
      }
    }
    top_of_row(combined.data(), n, k, v + r * k, t + r * k);
  }
  return {value, token};
}

torch::Tensor log_probs_at(const std::vector<torch::Tensor>& logits,
                           const std::vector<double>& weights, const std::vector<int64_t>& rows,
                           const std::vector<int64_t>& tokens) {
  bool all_fused = true;
  for (const auto& one : logits) all_fused = all_fused && fused(one);
  if (!all_fused) {
    auto index = torch::tensor(rows, torch::kLong).to(logits.front().device());
    std::vector<torch::Tensor> picked;
    for (const auto& one : logits) picked.push_back(one.index_select(0, index));
    auto log_probs = logits.size() == 1 ? torch::log_softmax(picked.front(), -1)
                                        : combine_log_probs(picked, weights);
    auto at = torch::tensor(tokens, torch::kLong).to(log_probs.device()).unsqueeze(1);
    return log_probs.gather(1, at).squeeze(1).to(torch::kCPU, torch::kFloat);
  }
  const int64_t n = logits.front().size(1);
  auto out = torch::empty({static_cast<int64_t>(rows.size())}, torch::kFloat);
  float* value = out.data_ptr<float>();
  // A row's maximum and normaliser, per model, for the last row asked (rows come grouped).
  int64_t row = -1;
  std::vector<float> top(logits.size()), norm(logits.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t m = 0; m < logits.size(); ++m) {
      const float* x = logits[m].data_ptr<float>() + rows[i] * n;
      if (rows[i] != row) {
        top[m] = kernels::max_of(x, n);
        norm[m] = log_sum(x, n, top[m], rows[i]);
      }
      const float term = (x[tokens[i]] - top[m]) - norm[m];
      // As top_log_probs: one model's value as it is, an ensemble's weighted in model order.
      if (logits.size() == 1) {
        value[i] = term;
      } else {
        const float weighted = static_cast<float>(weights[m]) * term;
        value[i] = m == 0 ? weighted : value[i] + weighted;
      }
    }
    row = rows[i];
  }
  return out;
}

}  // namespace tandem::decode
