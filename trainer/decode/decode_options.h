// How decoding runs: the options tandem-decode, tandem-eval and validation share (lengths, beam,
// length penalty, n-best, threads, sampling, a lexical shortlist), and their check.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "trainer/decode/sampling.h"
#include "trainer/model/alignment.h"

namespace tandem::data {
class Shortlist;  // data/shortlist/shortlist.h
}  // namespace tandem::data

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
  // Source tokens per batch when translating many sentences: small keeps a CPU batch's caches in
  // cache, a GPU wants far larger batches (tandem-decode --batch-tokens; docs/configs.md).
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
  // (data/shortlist/shortlist.h); null: the whole vocabulary. Its vocabulary size must be the
  // model's.
  std::shared_ptr<const data::Shortlist> shortlist;
  // Set: every hypothesis says, for each of its tokens, the source position these heads of the
  // (first) model attended to most as they predicted it, or read it with their shift
  // (Hypothesis::attended; tandem-decode --alignments).
  std::optional<model::AlignmentHeads> alignment;
};

// Throws std::invalid_argument naming the field at fault.
void check_options(const DecodeOptions& options, int64_t vocab_size);

}  // namespace tandem::decode
