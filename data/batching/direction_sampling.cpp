// The sampling policy: shares of an epoch's target tokens per direction, the draws that give them,
// and data.weights matched against the file's directions.
#include "data/batching/direction_sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace tandem::data {
namespace {

// The weight of each direction from `policy.weights`, in the directions' order;
// std::invalid_argument naming data.weights and the direction when a name is not one of the
// file's, a direction has none, or the file holds one direction.
std::vector<double> weights_of(const SamplingPolicy& policy, const Directions& directions,
                               const std::string& path) {
  if (!directions.several()) {
    throw std::invalid_argument("data.weights: corpus '" + path +
                                "' holds one corpus, not several (tandem-prep --corpora)");
  }
  for (const auto& [name, weight] : policy.weights) {
    if (directions.find(name) == nullptr) {
      throw std::invalid_argument("data.weights: no corpus '" + name + "' in '" + path +
                                  "' (its corpora: " + directions.listed() + ")");
    }
  }
  std::vector<double> weights;
  for (const Direction& direction : directions) {
    const auto found =
        std::find_if(policy.weights.begin(), policy.weights.end(),
                     [&](const auto& entry) { return entry.first == direction.name; });
    if (found == policy.weights.end()) {
      throw std::invalid_argument("data.weights: corpus '" + direction.name +
                                  "' has no weight (give one to each of " + directions.listed() +
                                  ")");
    }
    weights.push_back(found->second);
  }
  return weights;
}

}  // namespace

std::vector<double> sampling_shares(const std::vector<int64_t>& tokens, double temperature,
                                    const std::vector<double>& weights) {
  if (!(std::isfinite(temperature) && temperature > 0)) {
    throw std::invalid_argument("sampling temperature " + std::to_string(temperature) +
                                ": expected a positive number");
  }
  if (!weights.empty() && weights.size() != tokens.size()) {
    throw std::invalid_argument("sampling: " + std::to_string(weights.size()) + " weights for " +
                                std::to_string(tokens.size()) + " directions");
  }
  std::vector<double> shares(tokens.size());
  double sum = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (!weights.empty() && !(std::isfinite(weights[i]) && weights[i] > 0)) {
      throw std::invalid_argument("sampling weight " + std::to_string(weights[i]) +
                                  ": expected a positive number");
    }
    shares[i] =
        weights.empty() ? std::pow(static_cast<double>(tokens[i]), 1.0 / temperature) : weights[i];
    sum += shares[i];
  }
  for (double& share : shares) share /= sum;
  return shares;
}

std::vector<DirectionDraws> direction_draws(const std::vector<PairRange>& ranges,
                                            const std::vector<int64_t>& tokens,
                                            const std::vector<double>& shares) {
  int64_t all = 0;
  for (const int64_t t : tokens) all += t;
  std::vector<DirectionDraws> directions;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const PairRange& range = ranges[i];
    if (range.count < 1 || tokens[i] < 1) {
      throw std::invalid_argument("sampling: direction at pair " + std::to_string(range.first) +
                                  " has " + std::to_string(range.count) + " pairs and " +
                                  std::to_string(tokens[i]) + " target tokens; expected some");
    }
    const double mean_length = static_cast<double>(tokens[i]) / static_cast<double>(range.count);
    const double draws = shares[i] * static_cast<double>(all) / mean_length;
    directions.push_back({range, std::max<int64_t>(1, std::llround(draws))});
  }
  return directions;
}

std::vector<DirectionDraws> epoch_draws(const Directions& directions,
                                        const std::vector<int32_t>& train_tgt_lengths,
                                        const SamplingPolicy& policy, const std::string& path) {
  if (policy.each_pair_once()) return {};
  const std::vector<double> weights =
      policy.weights.empty() ? std::vector<double>{} : weights_of(policy, directions, path);
  std::vector<PairRange> ranges;
  std::vector<int64_t> tokens;
  for (const Direction& direction : directions) {
    const PairRange& range = direction.splits.at("train");
    ranges.push_back(range);
    tokens.push_back(std::accumulate(train_tgt_lengths.begin() + range.first,
                                     train_tgt_lengths.begin() + range.end(), int64_t{0}));
  }
  return direction_draws(ranges, tokens, sampling_shares(tokens, policy.temperature, weights));
}

std::string describe_draws(const std::vector<DirectionDraws>& draws, const Directions& directions) {
  std::string text = "an epoch draws";
  for (size_t k = 0; k < draws.size() && k < directions.size(); ++k) {
    text += std::string(k == 0 ? " " : ", ") + directions[k].name + " " +
            std::to_string(draws[k].draws) + " of its " + std::to_string(draws[k].pairs.count) +
            " pairs";
  }
  return text;
}

}  // namespace tandem::data
