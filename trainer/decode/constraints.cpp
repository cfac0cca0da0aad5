#include "trainer/decode/constraints.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace tandem::decode {

int64_t Constraints::include_tokens() const {
  int64_t tokens = 0;
  for (const auto& phrase : include) tokens += static_cast<int64_t>(phrase.size());
  return tokens;
}

void check_phrases(const Constraints& constraints) {
  if (static_cast<int64_t>(constraints.include.size()) > kMaxIncludePhrases) {
    throw std::invalid_argument(std::to_string(constraints.include.size()) +
                                " phrases to include: at most " +
                                std::to_string(kMaxIncludePhrases));
  }
  for (size_t i = 0; i < constraints.include.size(); ++i) {
    if (constraints.include[i].empty()) {
      throw std::invalid_argument("include phrase " + std::to_string(i) + " has no tokens");
    }
  }
  for (size_t i = 0; i < constraints.avoid.size(); ++i) {
    if (constraints.avoid[i].empty()) {
      throw std::invalid_argument("avoid phrase " + std::to_string(i) + " has no tokens");
    }
    for (size_t j = 0; j < constraints.include.size(); ++j) {
      if (contains_phrase(constraints.include[j], constraints.avoid[i])) {
        throw std::invalid_argument("include phrase " + std::to_string(j) +
                                    " contains avoid phrase " + std::to_string(i) +
                                    ": both cannot hold");
      }
    }
  }
}

namespace {

bool is_met(const ConstraintState& state, size_t phrase) { return (state.met >> phrase) & 1U; }

// The first phrase not met that starts with `token`, or -1.
int32_t phrase_started_by(const Constraints& constraints, const ConstraintState& state,
                          int32_t token) {
  for (size_t i = 0; i < constraints.include.size(); ++i) {
    if (!is_met(state, i) && constraints.include[i].front() == token) return static_cast<int32_t>(i);
  }
  return -1;
}

}  // namespace

ConstraintState state_after(const Constraints& constraints, ConstraintState state, int32_t token) {
  if (state.phrase >= 0) {
    const auto& phrase = constraints.include[state.phrase];
    if (phrase[state.matched] == token) {
      ++state.matched;
      ++state.progress;
      if (state.matched == static_cast<int32_t>(phrase.size())) {
        state.met |= uint64_t{1} << state.phrase;
        state.phrase = -1;
        state.matched = 0;
      }
      return state;
    }
    state.progress -= state.matched;  // left: the phrase starts over
    state.phrase = -1;
    state.matched = 0;
  }
  const int32_t started = phrase_started_by(constraints, state, token);
  if (started < 0) return state;
  state.phrase = started;
  return state_after(constraints, state, token);
}

std::vector<int32_t> needed_tokens(const Constraints& constraints, const ConstraintState& state) {
  if (state.phrase >= 0) return {constraints.include[state.phrase][state.matched]};
  std::vector<int32_t> tokens;
  for (size_t i = 0; i < constraints.include.size(); ++i) {
    const int32_t first = constraints.include[i].front();
    if (!is_met(state, i) && std::find(tokens.begin(), tokens.end(), first) == tokens.end()) {
      tokens.push_back(first);
    }
  }
  return tokens;
}

int64_t owed_tokens(const Constraints& constraints, const ConstraintState& state) {
  return constraints.include_tokens() - state.progress;
}

std::vector<int32_t> banned_tokens(const Constraints& constraints,
                                   const std::vector<int32_t>& prefix) {
  std::vector<int32_t> banned;
  for (const auto& phrase : constraints.avoid) {
    const size_t before = phrase.size() - 1;
    if (before > prefix.size()) continue;
    if (std::equal(phrase.begin(), phrase.end() - 1, prefix.end() - static_cast<int64_t>(before)) &&
        std::find(banned.begin(), banned.end(), phrase.back()) == banned.end()) {
      banned.push_back(phrase.back());
    }
  }
  return banned;
}

bool contains_phrase(const std::vector<int32_t>& tokens, const std::vector<int32_t>& phrase) {
  return std::search(tokens.begin(), tokens.end(), phrase.begin(), phrase.end()) != tokens.end();
}

}  // namespace tandem::decode
