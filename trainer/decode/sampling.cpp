#include "trainer/decode/sampling.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <numeric>
#include <stdexcept>

#include "trainer/common/whole_number.h"

namespace tandem::decode {
namespace {

// splitmix64's finaliser: a bijection of 64-bit words that mixes every bit into every other.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

[[noreturn]] void refuse(const std::string& text, const std::string& why) {
  throw std::invalid_argument("--sampling '" + text + "': " + why +
                              " (expected topk:K, topp:P or full)");
}

}  // namespace

SamplingOptions parse_sampling(const std::string& text, SamplingOptions base) {
  if (text == "full") {
    base.kind = SamplingKind::kFull;
    return base;
  }
  const size_t colon = text.find(':');
  const std::string kind = text.substr(0, colon),
                    value = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind != "topk" && kind != "topp") refuse(text, "unknown kind");
  if (kind == "topk") {
    base.kind = SamplingKind::kTopK;
    const auto k = parse_whole_number(value);
    if (!k || *k < 1) refuse(text, "K must be a whole number of at least 1");
    base.k = *k;
  } else {
    // The whole value must be the number (strtod stops at the first character that is not).
    const char* begin = value.c_str();
    char* end = nullptr;
    base.kind = SamplingKind::kTopP;
    base.p = std::strtod(begin, &end);
    if (value.empty() || *end != '\0' || !(base.p > 0.0 && base.p <= 1.0)) {
      refuse(text, "P must be in (0, 1]");
    }
  }
  return base;
}

double sampling_uniform(uint64_t seed, int64_t stream, int64_t step) {
  const uint64_t h =
      mix(mix(mix(seed) ^ static_cast<uint64_t>(stream)) ^ static_cast<uint64_t>(step));
  return static_cast<double>(h >> 11) * 0x1.0p-53;  // the top 53 bits
}

namespace {

// The index among the first `kept` weights of the first whose cumulative sum passes u times
// their total.
int64_t pick(const std::vector<double>& weight, int64_t kept, double u) {
  double restricted = 0.0;
  for (int64_t i = 0; i < kept; ++i) restricted += weight[i];
  const double target = u * restricted;
  double cumulative = 0.0;
  for (int64_t i = 0; i < kept; ++i) {
    cumulative += weight[i];
    if (cumulative > target) return i;
  }
  return kept - 1;  // rounding can leave the target past the last sum
}

// One row's draw (draw_tokens); `order` and `weight` are scratch space kept across rows.
int64_t draw_one(const double* s, int64_t vocab, const SamplingOptions& options, double u,
                 std::vector<int64_t>& order, std::vector<double>& weight) {
  order.clear();
  double top = -INFINITY;
  for (int64_t id = 0; id < vocab; ++id) {
    if (std::isfinite(s[id])) {
      order.push_back(id);
      top = std::max(top, s[id]);
    }
  }
  if (order.empty()) throw std::invalid_argument("draw_tokens: a row with no token to draw");
  // Most likely first, ties to the lower id (the same order everywhere); the whole distribution
  // needs no order (id order).
  const auto likelier = [s](int64_t a, int64_t b) {
    return s[a] > s[b] || (s[a] == s[b] && a < b);
  };
  auto kept = static_cast<int64_t>(order.size());
  if (options.kind == SamplingKind::kTopK) {
    kept = std::min(kept, options.k);
    std::partial_sort(order.begin(), order.begin() + kept, order.end(), likelier);
    order.resize(kept);  // draws among its k alone: no weight is needed for the rest
  } else if (options.kind == SamplingKind::kTopP) {
    std::sort(order.begin(), order.end(), likelier);
  }
  weight.resize(order.size());
  double total = 0.0;
  for (size_t i = 0; i < order.size(); ++i) {
    weight[i] = std::exp((s[order[i]] - top) / options.temperature);
    total += weight[i];
  }
  if (options.kind == SamplingKind::kTopP) {  // the fewest most likely reaching p
    double mass = 0.0;
    int64_t n = 0;
    while (n < kept && mass < options.p * total) mass += weight[n++];
    kept = std::max<int64_t>(n, 1);
  }
  return order[pick(weight, kept, u)];
}

}  // namespace

std::vector<int64_t> draw_tokens(const torch::Tensor& log_probs, const SamplingOptions& options,
                                 const std::vector<double>& u) {
  const auto scores = log_probs.to(torch::kCPU, torch::kDouble).contiguous();
  const int64_t rows = scores.size(0), vocab = scores.size(1);
  if (static_cast<int64_t>(u.size()) != rows) {
    throw std::invalid_argument("draw_tokens: " + std::to_string(u.size()) + " draws for " +
                                std::to_string(rows) + " rows");
  }
  std::vector<int64_t> tokens(rows), order;
  std::vector<double> weight;
  for (int64_t row = 0; row < rows; ++row) {
    tokens[row] =
        draw_one(scores.data_ptr<double>() + row * vocab, vocab, options, u[row], order, weight);
  }
  return tokens;
}

}  // namespace tandem::decode
