// Beam search's working state (internal to trainer/decode/): the live hypotheses of the sentences
// still decoding, and one step's continuations of a sentence.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "trainer/decode/constraints.h"

namespace tandem::decode {

// The live hypotheses of the sentences still decoding, `width` consecutive rows per sentence, in
// the decoder state's row order (width is 1 before the first step, the beam size after it).
struct Beams {
  std::vector<int64_t> sentence;             // input row of each active sentence
  std::vector<std::vector<int32_t>> tokens;  // [sentences * width] prefixes without BOS
  std::vector<double> scores;                // [sentences * width] summed log-probabilities
  // [sentences * width] each hypothesis' standing with its sentence's constraints; empty when
  // no sentence of the batch has any.
  std::vector<ConstraintState> standing;
  int64_t width = 1;
};

// What the columns of a step's logits are: the vocabulary's ids, or a shortlist's
// (model::RestrictedOutput: column i is ids[i]).
struct OutputColumns {
  torch::Tensor ids;             // [n] int64 on the models' device; undefined: column i is id i
  std::vector<int64_t> cpu_ids;  // the same on the CPU, sorted

  // Column indices (any shape, on ids' device) → the ids they stand for.
  torch::Tensor to_ids(const torch::Tensor& columns) const {
    return ids.defined() ? ids.index_select(0, columns.flatten()).view(columns.sizes()) : columns;
  }
  // The column of `id`; -1 when a shortlist leaves it out.
  int64_t column_of(int64_t id) const {
    if (!ids.defined()) return id;
    const auto at = std::lower_bound(cpu_ids.begin(), cpu_ids.end(), id);
    return at != cpu_ids.end() && *at == id ? at - cpu_ids.begin() : -1;
  }
};

// A hypothesis continued by one token.
struct Candidate {
  double score = 0;     // the parent's score + the token's log-probability
  int32_t token = 0;
  int64_t parent = 0;   // the parent's row within its sentence (0 .. width - 1)
  ConstraintState standing;  // after the token (constrained sentences only)
};

}  // namespace tandem::decode
