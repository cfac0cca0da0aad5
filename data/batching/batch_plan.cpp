// The global batch plan. Randomness comes from splitmix64 with our own bounded draws, so every
// standard library and machine produces the same plan for the same (seed, epoch).
#include "data/batching/batch_plan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace tandem::data {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): tiny, full-period, and good enough for shuffling.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound) by rejection, so no index is favoured.
  uint64_t below(uint64_t bound) {
    const uint64_t threshold = (0 - bound) % bound;  // 2^64 mod bound
    while (true) {
      const uint64_t r = next();
      if (r >= threshold) return r % bound;
    }
  }

 private:
  uint64_t state_;
};

template <typename T>
void shuffle(std::vector<T>& items, SplitMix64& rng) {
  for (size_t i = items.size(); i > 1; --i) {
    std::swap(items[i - 1], items[rng.below(i)]);
  }
}

// Distinct (seed, epoch) pairs start distinct streams: the epoch is hashed before mixing in.
SplitMix64 rng_for(uint64_t seed, int64_t epoch) {
  SplitMix64 epoch_hash(static_cast<uint64_t>(epoch) ^ 0xD1B54A32D192ED03ull);
  return SplitMix64(seed ^ epoch_hash.next());
}

// Sentences per pool: pool_batches batches of the corpus' mean padded length.
size_t pool_size(const std::vector<uint16_t>& padded, const BatchPlanOptions& options) {
  int64_t total = 0;
  for (const uint16_t length : padded) total += length;
  const int64_t mean = std::max<int64_t>(1, total / static_cast<int64_t>(padded.size()));
  const int64_t per_batch = std::max<int64_t>(1, options.max_tokens / mean);
  return static_cast<size_t>(per_batch * options.pool_batches);
}

void validate(const BatchPlanOptions& options, int64_t epoch) {
  if (options.max_tokens < 1) {
    throw std::invalid_argument("data.max_tokens " + std::to_string(options.max_tokens) +
                                ": expected > 0");
  }
  if (options.pool_batches < 1) {
    throw std::invalid_argument("batch plan pool_batches " + std::to_string(options.pool_batches) +
                                ": expected > 0");
  }
  if (epoch < 0) throw std::invalid_argument("batch plan epoch " + std::to_string(epoch) + " < 0");
}

// The greedy cut of sentences order[0, count): a batch grows while its sentences x its longest
// padded length stay within max_tokens. Appends where each batch starts (base + position).
template <class Index, class Padded>
void cut(const Index* order, size_t count, const Padded& padded, int64_t max_tokens, uint64_t base,
         std::vector<uint64_t>& starts) {
  int64_t longest = 0;
  int64_t in_batch = 0;
  for (size_t k = 0; k < count; ++k) {
    const auto length = static_cast<int64_t>(padded[order[k]]);
    if (in_batch > 0 && (in_batch + 1) * std::max(longest, length) > max_tokens) {
      in_batch = 0;
      longest = 0;
    }
    if (in_batch == 0) starts.push_back(base + k);
    ++in_batch;
    longest = std::max(longest, length);
  }
}

bool each_pair_once(const std::vector<DirectionDraws>& directions) {
  for (const DirectionDraws& direction : directions) {
    if (direction.draws != direction.pairs.count) return false;
  }
  return true;
}

// That `directions` tile the split's `pairs` in order, each with some pairs and no negative
// draws, and draw at most 2^32 - 1 pairs in all; std::invalid_argument otherwise. Returns the
// total.
uint64_t check_directions(const std::vector<DirectionDraws>& directions, size_t pairs) {
  uint64_t next = 0, total = 0;
  for (const DirectionDraws& direction : directions) {
    const PairRange& range = direction.pairs;
    if (range.first < 0 || static_cast<uint64_t>(range.first) != next || range.count < 1 ||
        direction.draws < 0) {
      throw std::invalid_argument(
          "batch plan: direction at pair " + std::to_string(range.first) + " (" +
          std::to_string(range.count) + " pairs, " + std::to_string(direction.draws) +
          " draws) does not follow the previous one at pair " + std::to_string(next));
    }
    next += static_cast<uint64_t>(range.count);
    total += static_cast<uint64_t>(direction.draws);
  }
  if (next != pairs) {
    throw std::invalid_argument("batch plan: the directions cover " + std::to_string(next) +
                                " pairs of the split's " + std::to_string(pairs));
  }
  if (total > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("batch plan: " + std::to_string(total) +
                                " pairs drawn an epoch; at most 2^32 - 1");
  }
  return total;
}

// The pairs an epoch draws (options.directions, checked): each direction's whole range
// draws / count times, then draws % count of its pairs by a partial Fisher-Yates shuffle of the
// range, on a stream of the direction's own so that the plan's other draws stay as they are.
std::vector<uint32_t> drawn_pairs(const BatchPlanOptions& options, uint64_t total, int64_t epoch) {
  std::vector<uint32_t> order;
  order.reserve(total);
  for (size_t k = 0; k < options.directions.size(); ++k) {
    const DirectionDraws& direction = options.directions[k];
    const auto first = static_cast<uint32_t>(direction.pairs.first);
    const auto count = static_cast<uint32_t>(direction.pairs.count);
    for (int64_t copy = 0; copy < direction.draws / direction.pairs.count; ++copy) {
      for (uint32_t i = 0; i < count; ++i) order.push_back(first + i);
    }
    const int64_t rest = direction.draws % direction.pairs.count;
    if (rest == 0) continue;
    SplitMix64 rng = rng_for(options.seed ^ (0xA0761D6478BD642Full * (k + 1)), epoch);
    std::vector<uint32_t> range(count);
    std::iota(range.begin(), range.end(), first);
    for (int64_t i = 0; i < rest; ++i) {
      const auto j = static_cast<size_t>(i) + rng.below(count - static_cast<uint64_t>(i));
      std::swap(range[static_cast<size_t>(i)], range[j]);
      order.push_back(range[static_cast<size_t>(i)]);
    }
  }
  return order;
}

}  // namespace

std::vector<std::vector<int64_t>> cut_batches(const std::vector<int64_t>& order,
                                              const std::vector<int64_t>& padded,
                                              int64_t max_tokens) {
  std::vector<uint64_t> starts;
  cut(order.data(), order.size(), padded, max_tokens, 0, starts);
  starts.push_back(order.size());
  std::vector<std::vector<int64_t>> batches;
  for (size_t b = 0; b + 1 < starts.size(); ++b) {
    batches.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(starts[b]),
                         order.begin() + static_cast<std::ptrdiff_t>(starts[b + 1]));
  }
  return batches;
}

std::vector<std::vector<int64_t>> sorted_batches(const std::vector<int64_t>& padded,
                                                 int64_t max_tokens) {
  std::vector<int64_t> order(padded.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return padded[a] < padded[b]; });
  return cut_batches(order, padded, max_tokens);
}

int64_t padded_length(int32_t src_len, int32_t tgt_len) {
  return static_cast<int64_t>(std::max(src_len, tgt_len)) + 1;
}

std::vector<uint16_t> padded_lengths(const std::vector<int32_t>& src_lengths,
                                     const std::vector<int32_t>& tgt_lengths) {
  if (src_lengths.size() != tgt_lengths.size()) {
    throw std::invalid_argument("batch plan: " + std::to_string(src_lengths.size()) +
                                " source lengths but " + std::to_string(tgt_lengths.size()) +
                                " target lengths; expected one per sentence pair on each side");
  }
  std::vector<uint16_t> padded(src_lengths.size());
  for (size_t i = 0; i < padded.size(); ++i) {
    const int64_t length = padded_length(src_lengths[i], tgt_lengths[i]);
    if (length < 1 || length > std::numeric_limits<uint16_t>::max()) {
      throw std::invalid_argument("batch plan: sentence pair " + std::to_string(i) + " has " +
                                  std::to_string(length - 1) + " tokens on a side; expected 0 to " +
                                  std::to_string(std::numeric_limits<uint16_t>::max() - 1));
    }
    padded[i] = static_cast<uint16_t>(length);
  }
  return padded;
}

std::vector<int64_t> BatchPlan::batch(int64_t index) const {
  if (index < first_ || index >= size_ || (index - first_) % stride_ != 0) {
    throw std::out_of_range("batch plan: batch " + std::to_string(index) + " of " +
                            std::to_string(size_) + " is not among those kept (" +
                            std::to_string(first_) + " + k * " + std::to_string(stride_) + ")");
  }
  const uint32_t cut_batch = order_[static_cast<size_t>((index - first_) / stride_)];
  return std::vector<int64_t>(
      sentences_.begin() + static_cast<std::ptrdiff_t>(starts_[cut_batch]),
      sentences_.begin() + static_cast<std::ptrdiff_t>(starts_[cut_batch + 1]));
}

void BatchPlan::keep_share(int64_t first, int64_t stride) {
  if (first_ != 0 || stride_ != 1 || first < 0 || stride < 1) {
    throw std::invalid_argument("batch plan: cannot keep share " + std::to_string(first) +
                                " + k * " + std::to_string(stride) +
                                " of a plan that is already a share");
  }
  // The kept batches' sentences, in epoch order, into exactly sized new arrays.
  std::vector<uint64_t> starts{0};
  for (int64_t index = first; index < size_; index += stride) {
    const uint32_t cut_batch = order_[static_cast<size_t>(index)];
    starts.push_back(starts.back() + starts_[cut_batch + 1] - starts_[cut_batch]);
  }
  std::vector<uint32_t> sentences(starts.back());
  for (int64_t index = first, j = 0; index < size_; index += stride, ++j) {
    const uint32_t cut_batch = order_[static_cast<size_t>(index)];
    std::copy(sentences_.begin() + static_cast<std::ptrdiff_t>(starts_[cut_batch]),
              sentences_.begin() + static_cast<std::ptrdiff_t>(starts_[cut_batch + 1]),
              sentences.begin() + static_cast<std::ptrdiff_t>(starts[j]));
  }
  sentences_ = std::move(sentences);
  starts_ = std::move(starts);
  order_.resize(starts_.size() - 1);
  order_.shrink_to_fit();
  std::iota(order_.begin(), order_.end(), 0u);
  first_ = first;
  stride_ = stride;
}

std::vector<std::vector<int64_t>> BatchPlan::batches() const {
  std::vector<std::vector<int64_t>> all;
  for (int64_t k = 0; k < size(); ++k) all.push_back(batch(k));
  return all;
}

BatchPlan make_batch_plan(const std::vector<uint16_t>& padded, const BatchPlanOptions& options,
                          int64_t epoch) {
  validate(options, epoch);
  BatchPlan plan;
  if (padded.empty()) return plan;
  if (padded.size() > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("batch plan: " + std::to_string(padded.size()) +
                                " sentence pairs; at most 2^32 - 1 in one split");
  }
  SplitMix64 rng = rng_for(options.seed, epoch);
  std::vector<uint32_t>& order = plan.sentences_;
  const uint64_t drawn = options.directions.empty()
                             ? padded.size()
                             : check_directions(options.directions, padded.size());
  if (each_pair_once(options.directions)) {
    order.resize(padded.size());
    std::iota(order.begin(), order.end(), 0u);
  } else {
    order = drawn_pairs(options, drawn, epoch);
    if (order.empty()) return plan;
  }
  shuffle(order, rng);

  // Sorting inside pools keeps padding low while batches still mix the whole corpus over epochs;
  // stable_sort keeps equal lengths in shuffled order, deterministically.
  const size_t pool = pool_size(padded, options);
  for (size_t begin = 0; begin < order.size(); begin += pool) {
    const size_t end = std::min(order.size(), begin + pool);
    const auto first = order.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = order.begin() + static_cast<std::ptrdiff_t>(end);
    std::stable_sort(first, last, [&](uint32_t a, uint32_t b) { return padded[a] < padded[b]; });
    cut(order.data() + begin, end - begin, padded, options.max_tokens, begin, plan.starts_);
  }
  plan.starts_.push_back(order.size());
  plan.order_.resize(plan.starts_.size() - 1);
  std::iota(plan.order_.begin(), plan.order_.end(), 0u);
  shuffle(plan.order_, rng);  // the same draws as shuffling the batches themselves
  plan.size_ = static_cast<int64_t>(plan.order_.size());
  return plan;
}

}  // namespace tandem::data
