#include "trainer/decode/constrained_step.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "trainer/common/token_ids.h"
#include "trainer/decode/top_log_probs.h"

namespace tandem::decode {

bool check_constraints(const std::vector<Constraints>& constraints, int64_t vocab_size,
                       int64_t max_positions, bool forced) {
  bool any = false;
  for (size_t row = 0; row < constraints.size(); ++row) {
    const auto& mine = constraints[row];
    const auto where = "beam_search: row " + std::to_string(row) + ": ";
    try {
      check_phrases(mine);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(where + e.what());
    }
    for (const auto* phrases : {&mine.include, &mine.avoid}) {
      for (const auto& phrase : *phrases) {
        for (const int32_t token : phrase) {
          if (token < 0 || token >= vocab_size || token == kPadId || token == kBosId ||
              token == kEosId) {
            throw std::invalid_argument(where + "token " + std::to_string(token) +
                                        " cannot be part of a translation");
          }
        }
      }
    }
    const int64_t room = max_positions - (forced ? 2 : 1);
    if (mine.include_tokens() > room) {
      throw std::invalid_argument(where + std::to_string(mine.include_tokens()) +
                                  " include tokens: the model's translations hold at most " +
                                  std::to_string(room));
    }
    any = any || !mine.empty();
  }
  return any;
}

std::vector<std::vector<int32_t>> avoid_bans(const Beams& beams,
                                             const std::vector<Constraints>& constraints) {
  std::vector<std::vector<int32_t>> banned(beams.tokens.size());
  for (size_t row = 0; row < beams.tokens.size(); ++row) {
    const auto& mine = constraints[beams.sentence[row / beams.width]];
    if (!mine.avoid.empty()) banned[row] = banned_tokens(mine, beams.tokens[row]);
  }
  return banned;
}

std::vector<std::vector<std::pair<int32_t, float>>> needed_log_probs(
    const std::vector<torch::Tensor>& logits, const std::vector<double>& weights,
    const OutputColumns& columns, const Beams& beams, const std::vector<Constraints>& constraints) {
  std::vector<std::vector<std::pair<int32_t, float>>> needed(beams.tokens.size());
  std::vector<int64_t> rows, tokens, at;
  for (size_t row = 0; row < beams.tokens.size(); ++row) {
    const auto& mine = constraints[beams.sentence[row / beams.width]];
    if (mine.include.empty()) continue;
    for (const int32_t token : needed_tokens(mine, beams.standing[row])) {
      rows.push_back(static_cast<int64_t>(row));
      tokens.push_back(token);
      at.push_back(columns.column_of(token));  // a shortlist holds its batch's phrases' tokens
    }
  }
  if (rows.empty()) return needed;
  const auto values = log_probs_at(logits, weights, rows, at);
  const float* value = values.data_ptr<float>();
  for (size_t i = 0; i < rows.size(); ++i) {
    needed[rows[i]].emplace_back(static_cast<int32_t>(tokens[i]), value[i]);
  }
  return needed;
}

std::vector<int64_t> allocate_slots(const std::vector<int64_t>& counts, int64_t beam) {
  const auto banks = static_cast<int64_t>(counts.size());
  std::vector<int64_t> slots(banks, beam / banks);
  for (int64_t i = 0; i < beam % banks; ++i) ++slots[banks - 1 - i];
  for (int64_t b = banks - 1; b > 0; --b) {
    const int64_t spare = slots[b] - counts[b];
    if (spare > 0) {
      slots[b] -= spare;
      slots[b - 1] += spare;
    }
  }
  int64_t unused = std::max<int64_t>(slots[0] - counts[0], 0);
  slots[0] -= unused;
  for (int64_t b = banks - 1; b >= 0 && unused > 0; --b) {
    const int64_t take = std::min(unused, counts[b] - slots[b]);
    slots[b] += take;
    unused -= take;
  }
  return slots;
}

namespace {

bool contains(const std::vector<int32_t>& tokens, int32_t token) {
  return std::find(tokens.begin(), tokens.end(), token) != tokens.end();
}

// The candidates of decoder row `row` (the hypothesis at `parent` within its sentence), unordered.
void row_candidates(const ConstrainedStep& step, const Beams& beams, int64_t row, int64_t parent,
                    const Constraints& constraints, bool ban_eos, int64_t steps_left,
                    std::vector<Candidate>& out) {
  const ConstraintState& standing = beams.standing[row];
  const bool all_met = owed_tokens(constraints, standing) == 0;
  const auto& banned = step.banned[row];
  std::vector<int32_t> taken;
  // Scores are sums of per-step float log-probabilities, added in double in step order.
  auto consider = [&](int32_t token, float logp) {
    if (contains(taken, token) || contains(banned, token)) return;
    taken.push_back(token);
    if (token == kEosId) {
      if (!ban_eos && all_met) out.push_back({beams.scores[row] + logp, token, parent, standing});
      return;
    }
    const auto next = state_after(constraints, standing, token);
    if (owed_tokens(constraints, next) > steps_left) return;  // no room left for the phrases
    out.push_back({beams.scores[row] + logp, token, parent, next});
  };
  auto logp = step.logp.accessor<float, 2>()[row];
  auto token = step.token.accessor<int64_t, 2>()[row];
  for (int64_t i = 0; i < step.logp.size(1); ++i) {
    if (logp[i] != -INFINITY) consider(static_cast<int32_t>(token[i]), logp[i]);
  }
  for (const auto& [needed, value] : step.needed[row]) consider(needed, value);
}

bool better(const Candidate& a, const Candidate& b) { return a.score > b.score; }

}  // namespace

std::vector<Candidate> constrained_candidates(const ConstrainedStep& step, const Beams& beams,
                                              int64_t index, const Constraints& constraints,
                                              int64_t beam, bool ban_eos, int64_t steps_left) {
  std::vector<Candidate> all;
  for (int64_t parent = 0; parent < beams.width; ++parent) {
    row_candidates(step, beams, index * beams.width + parent, parent, constraints, ban_eos,
                   steps_left, all);
  }
  if (all.empty()) {
    throw std::runtime_error("sentence " + std::to_string(beams.sentence[index]) +
                             ": no hypothesis can continue (its avoid phrases block its include "
                             "phrases)");
  }
  std::stable_sort(all.begin(), all.end(), better);
  std::vector<int64_t> counts(constraints.include_tokens() + 1, 0);
  for (const auto& c : all) ++counts[c.standing.progress];
  auto slots = allocate_slots(counts, beam);
  std::vector<Candidate> chosen, rest;
  for (auto& c : all) {
    auto& free = slots[c.standing.progress];
    (free > 0 ? chosen : rest).push_back(std::move(c));
    if (free > 0) --free;
  }
  std::stable_sort(chosen.begin(), chosen.end(), better);
  chosen.insert(chosen.end(), rest.begin(), rest.end());
  // The next beam needs K hypotheses that go on: too few, and the last repeats at -inf, which
  // nothing after it can beat. (None at all: the sentence ends with those that end.)
  const auto goes_on = [](const Candidate& c) { return c.token != kEosId; };
  const auto last = std::find_if(chosen.rbegin(), chosen.rend(), goes_on);
  if (last == chosen.rend()) return chosen;
  Candidate filler = *last;
  filler.score = -INFINITY;
  for (auto n = std::count_if(chosen.begin(), chosen.end(), goes_on); n < beam; ++n) {
    chosen.push_back(filler);
  }
  return chosen;
}

}  // namespace tandem::decode
