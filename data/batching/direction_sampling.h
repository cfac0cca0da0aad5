// How an epoch samples a file's directions (fairseq's multilingual sampling): each pair once, in
// proportion to the directions' sizes; by a temperature over their sizes; or by explicit weights.
// What the policy decides is how many pairs an epoch draws from each direction (batch_plan.h's
// DirectionDraws); the batch plan draws them.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "data/batching/batch_plan.h"
#include "data/corpus/direction.h"

namespace tandem::data {

struct SamplingPolicy {
  // Shares of an epoch's target tokens proportional to tokens^(1 / temperature) (fairseq's and
  // M2M-100's temperature sampling: 1 is in proportion to size, larger moves towards equal).
  double temperature = 1.0;
  // Or proportional to these, every direction named once (data.weights); empty: by temperature.
  std::vector<std::pair<std::string, double>> weights;

  // Temperature 1 without weights: every pair once an epoch, as in a file of one corpus.
  bool each_pair_once() const { return temperature == 1.0 && weights.empty(); }
};

// Each direction's share of an epoch's target tokens: proportional to weights[i] when weights are
// given, else to tokens[i]^(1 / temperature). std::invalid_argument for a temperature or weight
// that is not a positive number.
std::vector<double> sampling_shares(const std::vector<int64_t>& tokens, double temperature,
                                    const std::vector<double>& weights = {});

// The pairs an epoch draws from each direction so that direction i gets `shares[i]` of the
// epoch's target tokens, the epoch's target tokens being the split's: draws_i = shares_i x (all
// directions' target tokens) / (direction i's mean target length), rounded. `ranges` gives each
// direction's pairs, `tokens` its target tokens (> 0); shares sum to 1.
std::vector<DirectionDraws> direction_draws(const std::vector<PairRange>& ranges,
                                            const std::vector<int64_t>& tokens,
                                            const std::vector<double>& shares);

// The draws of the train split of `directions` (whose target lengths `train_tgt_lengths` are) that
// `policy` asks for; none when it draws each pair once. std::invalid_argument naming data.weights
// and `path` (the corpus file) when a weight names no direction of the file, a direction has no
// weight, or the file holds one direction.
std::vector<DirectionDraws> epoch_draws(const Directions& directions,
                                        const std::vector<int32_t>& train_tgt_lengths,
                                        const SamplingPolicy& policy, const std::string& path);

// "an epoch draws en-es 3000 of its 3000 pairs, es-en 2500 of 1000": what the draws do.
std::string describe_draws(const std::vector<DirectionDraws>& draws, const Directions& directions);

}  // namespace tandem::data
