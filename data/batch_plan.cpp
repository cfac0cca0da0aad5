// The global batch plan. Randomness comes from splitmix64 with our own bounded draws, so every
// standard library and machine produces the same plan for the same (seed, epoch).
#include "data/batch_plan.h"

#include <algorithm>
#include <iterator>
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
size_t pool_size(const std::vector<int64_t>& padded, const BatchPlanOptions& options) {
  int64_t total = 0;
  for (const int64_t length : padded) total += length;
  const int64_t mean = std::max<int64_t>(1, total / static_cast<int64_t>(padded.size()));
  const int64_t per_batch = std::max<int64_t>(1, options.max_tokens / mean);
  return static_cast<size_t>(per_batch * options.pool_batches);
}

void validate(const std::vector<int32_t>& src_lengths, const std::vector<int32_t>& tgt_lengths,
              const BatchPlanOptions& options, int64_t epoch) {
  if (src_lengths.size() != tgt_lengths.size()) {
    throw std::invalid_argument("batch plan: " + std::to_string(src_lengths.size()) +
                                " source lengths but " + std::to_string(tgt_lengths.size()) +
                                " target lengths; expected one per sentence pair on each side");
  }
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

}  // namespace

// Greedy: a batch grows while sentences x longest <= max_tokens.
std::vector<std::vector<int64_t>> cut_batches(const std::vector<int64_t>& order,
                                              const std::vector<int64_t>& padded,
                                              int64_t max_tokens) {
  std::vector<std::vector<int64_t>> batches;
  std::vector<int64_t> batch;
  int64_t longest = 0;
  for (const int64_t sentence : order) {
    const int64_t longer = std::max(longest, padded[sentence]);
    if (!batch.empty() && static_cast<int64_t>(batch.size() + 1) * longer > max_tokens) {
      batches.push_back(std::move(batch));
      batch.clear();
      longest = 0;
    }
    batch.push_back(sentence);
    longest = std::max(longest, padded[sentence]);
  }
  if (!batch.empty()) batches.push_back(std::move(batch));
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

std::vector<std::vector<int64_t>> make_batch_plan(const std::vector<int32_t>& src_lengths,
                                                  const std::vector<int32_t>& tgt_lengths,
                                                  const BatchPlanOptions& options, int64_t epoch) {
  validate(src_lengths, tgt_lengths, options, epoch);
  std::vector<std::vector<int64_t>> batches;
  if (src_lengths.empty()) return batches;
  std::vector<int64_t> padded(src_lengths.size());
  for (size_t i = 0; i < padded.size(); ++i)
    padded[i] = padded_length(src_lengths[i], tgt_lengths[i]);

  SplitMix64 rng = rng_for(options.seed, epoch);
  std::vector<int64_t> order(padded.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  shuffle(order, rng);

  // Sorting inside pools keeps padding low while batches still mix the whole corpus over epochs;
  // stable_sort keeps equal lengths in shuffled order, deterministically.
  const size_t pool = pool_size(padded, options);
  for (size_t begin = 0; begin < order.size(); begin += pool) {
    const size_t end = std::min(order.size(), begin + pool);
    std::vector<int64_t> members(order.begin() + begin, order.begin() + end);
    std::stable_sort(members.begin(), members.end(),
                     [&](int64_t a, int64_t b) { return padded[a] < padded[b]; });
    auto cut = cut_batches(members, padded, options.max_tokens);
    batches.insert(batches.end(), std::make_move_iterator(cut.begin()),
                   std::make_move_iterator(cut.end()));
  }
  shuffle(batches, rng);
  return batches;
}

}  // namespace tandem::data
