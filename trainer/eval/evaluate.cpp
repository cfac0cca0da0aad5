#include "trainer/eval/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "data/batch.h"
#include "data/batch_plan.h"
#include "trainer/common/log.h"
#include "trainer/model/token_loss.h"

namespace tandem::eval {
namespace {

// Index groups of similar length whose padded size stays within max_tokens (the batch plan's cut).
std::vector<std::vector<int64_t>> length_batches(const std::vector<data::SentencePair>& pairs,
                                                 int64_t max_tokens) {
  std::vector<int64_t> padded(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) {
    padded[i] = data::padded_length(static_cast<int32_t>(pairs[i].src.size()),
                                    static_cast<int32_t>(pairs[i].tgt.size()));
  }
  return data::sorted_batches(padded, max_tokens);
}

// The position table bounds what the model can read: longer sequences are cut (BOS/EOS need one
// slot) and counted, rather than failing a whole file for one line.
size_t position_limit(const decode::Ensemble& ensemble) {
  return static_cast<size_t>(ensemble.max_positions() - 1);
}

int64_t truncate(std::vector<int32_t>& sequence, size_t limit) {
  if (sequence.size() <= limit) return 0;
  sequence.resize(limit);
  return 1;
}

void warn_truncated(int64_t count, size_t limit) {
  if (count == 0) return;
  log::warn(std::to_string(count) + " sentence(s) longer than " + std::to_string(limit) +
            " tokens were truncated (model.max_positions)");
}

}  // namespace

TeacherForced teacher_forced(const decode::Ensemble& ensemble,
                             std::vector<data::SentencePair> pairs, int64_t max_tokens) {
  const size_t limit = position_limit(ensemble);
  int64_t truncated = 0;
  for (auto& pair : pairs) truncated += truncate(pair.src, limit) + truncate(pair.tgt, limit);
  warn_truncated(truncated, limit);
  torch::NoGradGuard no_grad;
  ensemble.eval();
  const torch::Device device = ensemble.device();
  torch::Tensor stats;  // [nll sum, tokens, correct], added up on the device, read once
  for (const auto& indices : length_batches(pairs, max_tokens)) {
    std::vector<data::SentencePair> chunk;
    for (int64_t i : indices) chunk.push_back(pairs[i]);
    const auto batch = data::make_batch(chunk);
    const auto src = batch.src.to(device), tgt_in = batch.tgt_in.to(device);
    std::vector<torch::Tensor> logits;
    for (auto member : ensemble.models()) logits.push_back(member->forward(src, tgt_in));
    // token_loss normalises what it is given: for an ensemble, its weighted log-probabilities.
    const auto loss = model::token_loss(decode::combine_log_probs(logits, ensemble.weights()),
                                        batch.tgt_out.to(device), 0.0);
    stats = stats.defined() ? stats + loss.stats : loss.stats;
  }
  const auto counts = stats.defined() ? model::read_token_counts(stats) : model::TokenCounts{};
  const auto tokens = static_cast<double>(counts.tokens);
  TeacherForced out;
  out.tokens = counts.tokens;
  out.loss = tokens > 0 ? counts.nll_sum / tokens : 0;
  out.perplexity = std::exp(std::min(out.loss, 100.0));
  out.accuracy = tokens > 0 ? static_cast<double>(counts.correct) / tokens : 0;
  return out;
}

std::vector<std::vector<Translation>> translate_tokens_nbest(
    const decode::Ensemble& ensemble, const data::Vocab& vocab,
    std::vector<std::vector<int32_t>> sources, const decode::DecodeOptions& options,
    const std::vector<int32_t>& first_tokens, int64_t first_stream) {
  ensemble.eval();
  const size_t limit = position_limit(ensemble);
  int64_t truncated = 0;
  for (auto& source : sources) truncated += truncate(source, limit);
  warn_truncated(truncated, limit);
  std::vector<std::vector<Translation>> out;
  out.reserve(sources.size());
  for (const auto& hypotheses :
       decode::translate_nbest(ensemble, sources, options, first_tokens, first_stream)) {
    out.emplace_back();
    for (const auto& h : hypotheses) {
      out.back().push_back(
          {vocab.decode(h.tokens, data::Side::kTarget), h.score, h.normalized});
    }
  }
  return out;
}

std::vector<std::string> translate_tokens(const decode::Ensemble& ensemble,
                                          const data::Vocab& vocab,
                                          std::vector<std::vector<int32_t>> sources,
                                          const decode::DecodeOptions& options,
                                          const std::vector<int32_t>& first_tokens) {
  decode::DecodeOptions best = options;
  best.nbest = 1;
  std::vector<std::string> out;
  out.reserve(sources.size());
  for (auto& translations :
       translate_tokens_nbest(ensemble, vocab, std::move(sources), best, first_tokens)) {
    out.push_back(std::move(translations.front().text));
  }
  return out;
}

std::vector<int32_t> target_codes(const data::Vocab& vocab,
                                  const std::vector<data::SentencePair>& pairs) {
  std::vector<int32_t> codes;
  if (!vocab.coded()) return codes;
  std::set<int32_t> known;
  for (const auto& code : vocab.language_codes()) known.insert(code.id);
  for (const auto& pair : pairs) {
    if (pair.tgt.empty() || !known.count(pair.tgt.front())) {
      throw std::invalid_argument(
          "a sentence pair whose target does not start with a language code of the model "
          "(prepare the corpus with tandem-prep --vocab-from the model)");
    }
    codes.push_back(pair.tgt.front());
  }
  return codes;
}

Evaluation evaluate(const decode::Ensemble& ensemble, const data::Vocab& vocab,
                    const std::vector<data::SentencePair>& pairs,
                    const std::vector<std::string>& references, int64_t max_tokens,
                    const decode::DecodeOptions& options) {
  Evaluation out;
  out.forced = teacher_forced(ensemble, pairs, max_tokens);
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(pairs.size());
  for (const auto& pair : pairs) sources.push_back(pair.src);
  out.hypotheses = translate_tokens(ensemble, vocab, sources, options, target_codes(vocab, pairs));
  out.bleu = corpus_bleu(out.hypotheses, references);
  out.chrf = corpus_chrf(out.hypotheses, references);
  return out;
}

}  // namespace tandem::eval
