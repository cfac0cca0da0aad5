// Lexical constraints on a sentence's translations (Post & Vilar 2018): phrases each translation
// must contain, and phrases none may contain, as target token ids. A hypothesis' standing with
// them is a small value advanced per token; beam search only asks it which tokens are needed,
// which are banned, and how many tokens it still owes.
#pragma once

#include <cstdint>
#include <vector>

namespace tandem::decode {

// One sentence's constraints. Each phrase is a non-empty token sequence; at most
// kMaxIncludePhrases phrases to include.
struct Constraints {
  std::vector<std::vector<int32_t>> include;  // every returned translation contains each
  std::vector<std::vector<int32_t>> avoid;    // no translation contains any

  bool empty() const { return include.empty() && avoid.empty(); }
  // The tokens of all include phrases: what a translation must spend on them.
  int64_t include_tokens() const;
};

constexpr int64_t kMaxIncludePhrases = 64;  // ConstraintState::met is a bit set

// Throws std::invalid_argument naming the phrase at fault: empty, too many, or an include phrase
// that holds an avoid phrase.
void check_phrases(const Constraints& constraints);

// Where one hypothesis stands with its sentence's include phrases: which are met, and the one it
// is in the middle of (its first `matched` tokens are the hypothesis' last ones). A phrase counts
// as met once all its tokens appeared in a row; a phrase begun and then left starts over.
struct ConstraintState {
  uint64_t met = 0;      // bit i: include[i] is met
  int32_t phrase = -1;   // the phrase in progress, -1 when none
  int32_t matched = 0;   // its tokens matched so far
  int32_t progress = 0;  // tokens of met phrases + matched: the hypothesis' bank in the search

  bool operator==(const ConstraintState& other) const {
    return met == other.met && phrase == other.phrase && matched == other.matched;
  }
};

// The state after `token`.
ConstraintState state_after(const Constraints& constraints, ConstraintState state, int32_t token);

// Tokens that take the hypothesis one token further: the next of the phrase in progress, or
// when none is, the first of every phrase not met. Empty once all are met.
std::vector<int32_t> needed_tokens(const Constraints& constraints, const ConstraintState& state);

// Tokens still owed: the include tokens minus the progress made (the phrase in progress assumed
// continued). 0 when every phrase is met.
int64_t owed_tokens(const Constraints& constraints, const ConstraintState& state);

// Tokens that would complete an avoid phrase after `prefix` (the hypothesis' tokens so far).
std::vector<int32_t> banned_tokens(const Constraints& constraints,
                                   const std::vector<int32_t>& prefix);

// Whether `tokens` contains `phrase` as a contiguous run (what tests and checks ask of outputs).
bool contains_phrase(const std::vector<int32_t>& tokens, const std::vector<int32_t>& phrase);

}  // namespace tandem::decode
