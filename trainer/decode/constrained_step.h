// One beam search step for sentences with lexical constraints, by dynamic beam allocation (Post &
// Vilar 2018): a hypothesis may also take the tokens its include phrases need, whatever their
// rank; the beam's slots are shared among banks of hypotheses by how many constraint tokens they
// have met, so that hypotheses which placed a phrase are not crowded out by those which did not;
// only a hypothesis that met every phrase may end, and none continues on a path that no longer
// leaves room for what it owes.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "trainer/decode/beams.h"
#include "trainer/decode/constraints.h"
#include "trainer/decode/output_columns.h"

namespace tandem::decode {

// What a step of a batch with constraints knows of every decoder row (hypothesis).
struct ConstrainedStep {
  torch::Tensor logp;   // [rows, n] float CPU: the row's best tokens' log-probabilities (-inf: never)
  torch::Tensor token;  // [rows, n] int64 CPU: those tokens
  std::vector<std::vector<int32_t>> banned;  // per row, tokens an avoid phrase bans after it
  // per row, the tokens its include phrases need next, with their log-probabilities
  std::vector<std::vector<std::pair<int32_t, float>>> needed;
};

// beam_search's constraints, one per row: each valid (check_phrases()), of tokens a translation can
// hold (in the vocabulary of `vocab_size`, not <pad>, <s> or EOS), their include phrases within
// a position table of `max_positions` (after a first token when `forced`).
// std::invalid_argument naming the row otherwise. → whether any row has any.
bool check_constraints(const std::vector<Constraints>& constraints, int64_t vocab_size,
                       int64_t max_positions, bool forced);

// Per decoder row of `beams`, the tokens its sentence's avoid phrases ban after it; `constraints`
// is per input row (beams.sentence indexes it).
std::vector<std::vector<int32_t>> avoid_bans(const Beams& beams,
                                             const std::vector<Constraints>& constraints);

// Per decoder row, the tokens its include phrases need next (needed_tokens), with their
// log-probabilities under the ensemble (log_probs_at; `columns` finds a token's column).
std::vector<std::vector<std::pair<int32_t, float>>> needed_log_probs(
    const std::vector<torch::Tensor>& logits, const std::vector<double>& weights,
    const OutputColumns& columns, const Beams& beams, const std::vector<Constraints>& constraints);

// Active sentence `index` of `beams` (its constraints `constraints`): its candidates in the order
// beam search takes them (advance_sentence: EOS among the first K ends a hypothesis, the first K
// others are the next beam). Candidates are each hypothesis' best tokens and the tokens it needs,
// less those an avoid phrase bans, EOS unless every phrase is met (and `ban_eos` is false), and
// any after which the hypothesis would owe more tokens than `steps_left` (the steps after this
// one). The first K are chosen bank by bank (allocate_slots), best score first; the others follow
// by score. std::runtime_error when no candidate is left (the phrases contradict each other).
std::vector<Candidate> constrained_candidates(const ConstrainedStep& step, const Beams& beams,
                                              int64_t index, const Constraints& constraints,
                                              int64_t beam, bool ban_eos, int64_t steps_left);

// The beam's `beam` slots over banks 0..counts.size() - 1 (bank b: candidates that met b
// constraint tokens; counts[b] of them): an equal share each, the remainder to the highest
// banks; from the highest bank down, slots a bank has no candidates for pass to the bank below,
// and what the lowest cannot use goes back to the highest banks with candidates to spare.
std::vector<int64_t> allocate_slots(const std::vector<int64_t>& counts, int64_t beam);

}  // namespace tandem::decode
