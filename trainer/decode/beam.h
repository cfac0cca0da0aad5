// Batched beam search over the model's incremental decoder (cached keys/values, encoder output
// projected once per sentence), with length normalisation and n-best lists. Greedy decoding is
// beam size 1 of this same search.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "trainer/decode/constraints.h"
#include "trainer/decode/decode_options.h"
#include "trainer/decode/ensemble.h"

namespace tandem::decode {

struct Hypothesis {
  std::vector<int32_t> tokens;  // without BOS/EOS
  double score = 0;             // sum of log-probabilities, EOS included (when emitted)
  bool ended = false;           // emitted EOS; false when cut at the length limit
  double normalized = 0;        // score / length^length_penalty, see hypothesis_length()
  // With DecodeOptions::alignment, per token the source position (into the source tokens, EOS
  // included) the alignment heads attended to most as they predicted it, or with its shift as
  // they read it (the step after; -1 for the last token of a hypothesis cut at the length limit);
  // else empty.
  std::vector<int32_t> attended = {};
};

// The length a hypothesis is normalised by: its tokens plus EOS when it emitted one (so, the
// number of log-probabilities in its score, as fairseq counts).
inline int64_t hypothesis_length(const Hypothesis& h) {
  return static_cast<int64_t>(h.tokens.size()) + (h.ended ? 1 : 0);
}

// What finished hypotheses are ranked by: score / length^alpha.
inline double normalized_score(double score, int64_t length, double alpha) {
  return score / std::pow(static_cast<double>(length), alpha);
}
inline double normalized_score(const Hypothesis& h, double alpha) {
  return normalized_score(h.score, hypothesis_length(h), alpha);
}

// What one row of a batch brings besides its source tokens; each field's default decodes the row
// as it would be without it.
struct RowInput {
  // The token its hypotheses start with (a target language's code, as transformers'
  // forced_bos_token_id and CTranslate2's target_prefix make it); -1: none. The first step reads
  // BOS as always and its choice is this token, adding 0 to the score; it is one of the
  // hypothesis' tokens (it counts in its length), and options.min_len counts the tokens after it.
  // Every row of a batch has one, or none does.
  int32_t first_token = -1;
  // The stream a row draws from when sampling (sampling.h): the sentence's index in the input, so
  // that its translation depends on nothing else; -1: the row's index in the batch.
  int64_t stream = -1;
  // Its lexical constraints (constraints.h): every returned hypothesis contains each include
  // phrase and no avoid phrase (dynamic beam allocation, constrained_step.h); its step limit grows
  // by its include tokens, and a hypothesis cut at the limit has met them too. At beam size 1 each
  // step takes the candidate that went furthest with the phrases. Not with sampling.
  Constraints constraints;
};

// One RowInput per token of `first_tokens` (none: none), the other fields at their defaults.
std::vector<RowInput> first_token_rows(const std::vector<int32_t>& first_tokens);

// src [batch, src_len] int64 (tokens + EOS, padded with kPadId), `rows` none or one per row of
// src → for every row its `nbest` hypotheses, best normalised score first. Under
// c10::InferenceMode (the caller sets eval mode), with denormal floats flushed to zero on the
// calling thread (kernels/cpu/denormals.h). An ensemble's models keep their own decoder states; a
// candidate's log-probability is the weighted sum of theirs (ensemble.h).
//
// Each step expands every live hypothesis of a sentence and takes its 2K best (hypothesis, token)
// candidates by summed log-probability (step_candidates.h, after the token rules of
// token_rules.h); those ending in EOS among the first K are finished, the first K others are the
// next live beam. A sentence is done when it has K finished hypotheses (fairseq's rule) or at its
// length limit, where the live ones join the finished unterminated; or sooner, with the same
// results, once no live hypothesis can still score among the `nbest` best finished ones. K = 1 is
// exactly greedy decoding. With options.sampling each step draws a row's next token instead, from
// the ensemble's renormalised distribution; the score adds its log-probability before
// temperature and cuts. std::invalid_argument for bad options or rows (naming the field or row).
std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& ensemble, const torch::Tensor& src,
                                                 const DecodeOptions& options,
                                                 const std::vector<RowInput>& rows = {});

}  // namespace tandem::decode
