// Evaluation of a model on sentence pairs: teacher-forced loss, perplexity and token accuracy,
// and the quality of its own translations (beam search, greedy at beam size 1) as corpus BLEU and
// chrF2. tandem-eval, tandem-decode and validation during training use it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/vocab/vocab.h"
#include "trainer/bleu/bleu_chrf.h"
#include "trainer/decode/translate.h"

namespace tandem::eval {

struct TeacherForced {
  double loss = 0;  // mean NLL per target token (nats)
  double perplexity = 0;
  double accuracy = 0;  // argmax == target, over target tokens (EOS included)
  int64_t tokens = 0;
};

struct Evaluation {
  TeacherForced forced;
  BleuScore bleu;
  double chrf = 0;
  std::vector<std::string> hypotheses;  // detokenized, input order
};

// Batches of at most max_tokens padded tokens, no gradients, models in eval mode; sides longer than
// the position table are truncated, with a warning. An ensemble is scored by its distribution:
// log_softmax of the weighted sum of its models' log-probabilities.
TeacherForced teacher_forced(const decode::Ensemble& ensemble,
                             std::vector<data::SentencePair> pairs, int64_t max_tokens);

// The log-probability of one pair's target given its source, teacher-forced (forced decoding).
struct SentenceScore {
  double total = 0;    // summed over the target's tokens, EOS included (nats, <= 0)
  int64_t tokens = 0;  // the target's tokens, EOS included
};

// Each pair's SentenceScore, in input order, by the same batches, truncation and ensemble
// distribution as teacher_forced: their totals sum to -loss x tokens of teacher_forced.
std::vector<SentenceScore> sentence_scores(const decode::Ensemble& ensemble,
                                           std::vector<data::SentencePair> pairs,
                                           int64_t max_tokens);

// One translation of a sentence, with the scores beam search gave it.
struct Translation {
  std::string text;       // detokenized
  double score = 0;       // summed log-probability, EOS included (when emitted)
  double normalized = 0;  // score / length^length_penalty: what hypotheses are ranked by
  // With DecodeOptions::alignment: its tokens, and per token the word of `text` it falls in (-1:
  // none) and the source position its alignment heads attended to most; else empty.
  std::vector<int32_t> tokens = {}, words = {}, attended = {};
};

// What alignment heads attended to as they predicted a target: per target token (EOS not
// included) a row over the source positions (the source's tokens, then EOS).
struct AttentionRows {
  int64_t positions = 0;
  std::vector<float> rows = {};  // row j at rows[j * positions]
};

// Per row, the position attended to most (the first of equals).
std::vector<int32_t> most_attended(const AttentionRows& attention);

// Forced alignment: per pair, what `heads` of the ensemble's first model attended to as they
// predicted each target token, teacher-forced, by the same batches and truncation as
// sentence_scores.
std::vector<AttentionRows> forced_attention(const decode::Ensemble& ensemble,
                                            std::vector<data::SentencePair> pairs,
                                            int64_t max_tokens,
                                            const model::AlignmentHeads& heads);

// The options.nbest best translations of each token sequence, best first, in input order. Sources
// longer than the model's position table are truncated, with a warning. `rows`: none, or per
// sentence what it brings besides its tokens (decode::RowInput: the first token of a model with
// language codes, its sampling stream, its lexical constraints).
std::vector<std::vector<Translation>> translate_tokens_nbest(
    const decode::Ensemble& ensemble, const data::Vocab& vocab,
    std::vector<std::vector<int32_t>> sources, const decode::DecodeOptions& options,
    const std::vector<decode::RowInput>& rows = {});

// The best translation of each token sequence, detokenized (translate_tokens_nbest with nbest 1).
std::vector<std::string> translate_tokens(const decode::Ensemble& ensemble,
                                          const data::Vocab& vocab,
                                          std::vector<std::vector<int32_t>> sources,
                                          const decode::DecodeOptions& options,
                                          const std::vector<decode::RowInput>& rows = {});

// Everything at once; `references` are the detokenized reference sentences of `pairs`. With a
// vocabulary with language codes, each translation starts with its pair's (data::target_codes).
Evaluation evaluate(const decode::Ensemble& ensemble, const data::Vocab& vocab,
                    const std::vector<data::SentencePair>& pairs,
                    const std::vector<std::string>& references, int64_t max_tokens,
                    const decode::DecodeOptions& options);

}  // namespace tandem::eval
