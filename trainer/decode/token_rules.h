// The rules that take tokens out of a step's reach before the search chooses among the rest
// (CTranslate2's LogitsProcessor list, decoding_utils.h): <pad> and <s> never, EOS not before the
// minimum length, no token that completes an avoid phrase. Each rule adds what it bans at a step
// to one StepBans, which the step then applies once: to each row's best tokens when searching, to
// the whole distribution when sampling. (A lexical shortlist is no rule: it narrows the output
// layer itself, output_columns.h.)
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "trainer/decode/beams.h"
#include "trainer/decode/constraints.h"
#include "trainer/decode/output_columns.h"

namespace tandem::decode {

// What a step takes out of reach.
struct StepBans {
  std::vector<int64_t> everywhere;            // tokens no row may take
  std::vector<std::vector<int32_t>> per_row;  // empty, or per decoder row the tokens it may not

  // The most tokens one row loses: how many more than it needs a row's best tokens must hold.
  int64_t most() const;
  bool bans_everywhere(int64_t token) const;
  bool bans(int64_t row, int64_t token) const;
};

// What a rule sees of a step: its number (it adds each hypothesis' step-th token) and the live
// hypotheses, one per decoder row.
struct StepView {
  int64_t step = 1;
  const Beams& beams;
};

class TokenRule {
 public:
  virtual ~TokenRule() = default;
  // Adds what the rule bans at `step` to `bans`.
  virtual void ban(const StepView& step, StepBans& bans) const = 0;
};

// <pad> and <s> are never a continuation (as a MarianMT model's bad_words_ids bans its pad, which
// is an imported model's <s>).
class NeverEmitted final : public TokenRule {
 public:
  void ban(const StepView& step, StepBans& bans) const override;
};

// EOS ends a hypothesis only once it holds `min_len` tokens (fairseq's --min-len): step s adds a
// hypothesis' s-th token, so EOS is banned while s <= min_len.
class MinimumLength final : public TokenRule {
 public:
  explicit MinimumLength(int64_t min_len) : min_len_(min_len) {}
  void ban(const StepView& step, StepBans& bans) const override;

 private:
  int64_t min_len_;
};

// No token that would complete an avoid phrase of the row's sentence after its hypothesis
// (`constraints`: per input row, as beams.sentence indexes them).
class AvoidPhrases final : public TokenRule {
 public:
  explicit AvoidPhrases(const std::vector<Constraints>& constraints) : constraints_(constraints) {}
  void ban(const StepView& step, StepBans& bans) const override;

 private:
  const std::vector<Constraints>& constraints_;
};

using TokenRules = std::vector<std::unique_ptr<TokenRule>>;

// A search's rules, in the order they apply: NeverEmitted, MinimumLength(min_len) and, when any
// row has constraints, AvoidPhrases (which keeps a reference to `constraints`).
TokenRules token_rules(int64_t min_len, const std::vector<Constraints>& constraints,
                       bool constrained);

// What `rules` ban at `step`, each rule in turn, into `bans`, cleared first. The search keeps one
// StepBans for all its steps, so that a step allocates nothing for it (docs/benchmarks.md: what a
// step's small allocations cost fp32 decoding).
void step_bans(const TokenRules& rules, const StepView& step, StepBans& bans);

// Sets to -inf the entries of `logp` [rows, n] (float) whose tokens [rows, n] (ids) `bans` bans:
// in a loop over contiguous CPU tensors, by tensor ops on the tensors' device otherwise.
void ban_tokens(const StepBans& bans, torch::Tensor& logp, const torch::Tensor& tokens);

// Sets to -inf the banned tokens' columns of a distribution `log_probs` [rows, columns] on the CPU;
// a token the columns leave out (a shortlist's) needs nothing.
void ban_columns(const StepBans& bans, const OutputColumns& columns, torch::Tensor& log_probs);

}  // namespace tandem::decode
