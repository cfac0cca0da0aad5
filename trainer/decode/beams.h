// Beam search's working state (internal to trainer/decode/): the live hypotheses of the sentences
// still decoding, and one step's continuations of a sentence.
#pragma once

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
  // [sentences * width] per prefix token the source position attended to most (Hypothesis::
  // attended); empty without DecodeOptions::alignment.
  std::vector<std::vector<int32_t>> attended;
  int64_t width = 1;
};

// A hypothesis continued by one token.
struct Candidate {
  double score = 0;     // the parent's score + the token's log-probability
  int32_t token = 0;
  int64_t parent = 0;   // the parent's row within its sentence (0 .. width - 1)
  ConstraintState standing;  // after the token (constrained sentences only)
};

}  // namespace tandem::decode
