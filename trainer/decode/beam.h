// Batched beam search over the model's incremental decoder (cached keys/values, encoder output
// projected once per sentence), with length normalisation and n-best lists. Greedy decoding is
// beam size 1 of this same search.
#pragma once

#include <torch/torch.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "data/shortlist.h"
#include "trainer/decode/constraints.h"
#include "trainer/decode/ensemble.h"
#include "trainer/decode/sampling.h"

namespace tandem::decode {

// One set of defaults for tandem-decode, tandem-eval and validation during training, so that they
// produce the same translations unless told otherwise.
struct DecodeOptions {
  // At most a * source length + b decoding steps per sentence (EOS is one of them), where source
  // length counts non-pad tokens (EOS included); at least 1, at most the model's max_positions.
  double max_len_a = 1.2;
  int64_t max_len_b = 10;
  // Tokens a translation has at least before EOS may end it (fairseq's --min-len, CTranslate2's
  // min_decoding_length, both 1 by default): 1 forbids the empty translation, which could
  // otherwise take one of beam search's finished places; 0 lets EOS end one at its first step.
  int64_t min_len = 1;
  // Source tokens per batch when translating many sentences. On one CPU core 2048 decoded the
  // Bible test split ~6 % faster than 4096 at beam 4 (the batch's caches stay in cache); a GPU
  // wants far larger batches (tandem-decode --batch-tokens).
  int64_t batch_tokens = 2048;
  // Hypotheses kept per sentence at every step (Vaswani et al. used 4); 1 is greedy decoding.
  // At most (vocab_size - 2) / 2: each step looks at the 2 * beam_size best continuations, and
  // <pad> and <s> are never one (an imported MarianMT model's <s> is its pad, which it never
  // emits).
  int64_t beam_size = 4;
  // alpha in score / length^alpha, the number finished hypotheses are ranked by (fairseq's
  // --lenpen): 0 ranks by the summed log-probability, 1 by the mean per token.
  double length_penalty = 0.6;
  int64_t nbest = 1;  // hypotheses returned per sentence, best first; 1..beam_size
  // Batches translated at once when translating many sentences, each on its own thread (one
  // LibTorch intra-op thread each is what scales: see configure_cpu_runtime).
  int64_t threads = 1;
  // Drawing each next token instead of searching (tandem-decode --sampling): beam_size 1 only.
  SamplingOptions sampling;
  // A lexical shortlist (tandem-decode --shortlist): each batch's output layer scores only the
  // target ids its sources' lists, the frequent ones, EOS and its constraints' tokens give
  // (data/shortlist.h); null: the whole vocabulary. Its vocabulary size must be the model's.
  std::shared_ptr<const data::Shortlist> shortlist;
};

struct Hypothesis {
  std::vector<int32_t> tokens;  // without BOS/EOS
  double score = 0;             // sum of log-probabilities, EOS included (when emitted)
  bool ended = false;           // emitted EOS; false when cut at the length limit
  double normalized = 0;        // score / length^length_penalty, see hypothesis_length()
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

// Throws std::invalid_argument naming the field at fault.
void validate(const DecodeOptions& options, int64_t vocab_size);

// src [batch, src_len] int64 (tokens + EOS, padded with kPadId) → for every row its `nbest`
// hypotheses, best normalised score first. Runs under c10::InferenceMode (the caller sets eval
// mode): no autograd bookkeeping on its tensors, which at one row a step was ~10 % of a step; and
// on the calling thread with denormal floats flushed to zero (kernels/cpu/denormals.h).
// An ensemble's models each keep their own decoder state; a candidate's log-probability is the
// weighted sum of theirs (see Ensemble).
//
// Each step expands every live hypothesis of a sentence, takes the 2K best (hypothesis, token)
// candidates by summed log-probability; those ending in EOS among the first K are finished, the
// first K others are the next live beam (so the beam stays full and finished hypotheses are never
// fed to the decoder again). A sentence is done when it has K finished hypotheses (fairseq's
// rule) or at its length limit, where the live hypotheses join the finished ones unterminated.
// It stops sooner, with the same results, once no live hypothesis can still score among the
// `nbest` best finished ones (its descendants' scores can only fall). With K = 1 this is exactly
// greedy decoding.
//
// `first_tokens`, when given, holds per row the token its hypotheses start with (a target
// language's code, as transformers' forced_bos_token_id and CTranslate2's target_prefix make it):
// the first step feeds BOS as always, and its choice is that token, adding 0 to the score. It is
// one of the hypothesis' tokens (so it counts in its length), and options.min_len counts the
// tokens after it.
//
// With options.sampling, each step draws a row's next token instead (sampling.h) from the
// ensemble's renormalised distribution, <pad> and <s> never and EOS not before min_len; the score
// adds the drawn token's log-probability under that distribution (before temperature and cuts).
// Row r draws from stream `streams[r]` (r when not given): the sentence's index in the input, so
// that its translation depends on nothing else.
//
// `constraints`, when given, holds per row its lexical constraints (constraints.h; rows without
// any decode as they would without): every returned hypothesis of a row contains each of its
// include phrases and none of its avoid phrases, found by dynamic beam allocation
// (constrained_step.h); its step limit grows by its include tokens, and a hypothesis cut at the
// limit has met them too. Beam size 1 takes, at every step, the candidate that went furthest with
// the phrases (the best of those). Not with sampling (std::invalid_argument).
std::vector<std::vector<Hypothesis>> beam_search(const Ensemble& ensemble, const torch::Tensor& src,
                                                 const DecodeOptions& options,
                                                 const std::vector<int32_t>& first_tokens = {},
                                                 const std::vector<int64_t>& streams = {},
                                                 const std::vector<Constraints>& constraints = {});

}  // namespace tandem::decode
