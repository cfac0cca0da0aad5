// One step of the search: each active sentence's candidates (a hypothesis continued by a token),
// in the order beam search takes them, from the models' logits and what the step's rules ban
// (token_rules.h): by score from each row's best tokens, bank by bank for sentences with
// constraints (constrained_step.h), or drawn when sampling.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/decode/beams.h"
#include "trainer/decode/decode_options.h"
#include "trainer/decode/output_columns.h"
#include "trainer/decode/token_rules.h"

namespace tandem::decode {

// What every step of one beam_search call shares.
struct StepContext {
  const std::vector<double>& weights;  // the ensemble's
  const DecodeOptions& options;
  const TokenRules& rules;                      // applied in order at every step
  const std::vector<int64_t>& streams;          // per input row: its sampling stream
  const std::vector<Constraints>& constraints;  // empty, or per input row
  const std::vector<int64_t>& limits;           // per input row: its step limit
  const OutputColumns& columns;                 // what the logits' columns are
};

// Per active sentence of `beams` its candidates at `step` (logits: each model's [rows, columns]),
// in the order beam search takes them: best score first, EOS among the first K ending a
// hypothesis and the first K others the next beam. `bans`: the search's, kept from step to step
// (token_rules.h's step_bans).
std::vector<std::vector<Candidate>> step_candidates(const std::vector<torch::Tensor>& logits,
                                                    const Beams& beams, int64_t step,
                                                    const StepContext& how, StepBans& bans);

}  // namespace tandem::decode
