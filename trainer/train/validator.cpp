#include "trainer/train/validator.h"

#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>

#include "trainer/eval/bleu_chrf.h"
#include "trainer/eval/evaluate.h"

namespace tandem::train {

double ValidationResult::score(config::ValidMetric metric) const {
  switch (metric) {
    case config::ValidMetric::kLoss:
      return -loss;
    case config::ValidMetric::kChrf:
      return chrf;
    case config::ValidMetric::kBleu:
      return bleu;
  }
  return bleu;
}

Validator::Validator(const data::Corpus& corpus, const config::ValidConfig& config,
                     int64_t max_tokens, parallel::Communicator& comm)
    : vocab_(corpus.vocab()), config_(config), max_tokens_(max_tokens), comm_(comm) {
  if (!corpus.has_split("valid")) {
    throw std::invalid_argument("valid.every_steps is " + std::to_string(config.every_steps) +
                                " but corpus '" + corpus.path() +
                                "' has no valid split (tandem-prep --valid-src/--valid-tgt)");
  }
  total_ = corpus.size("valid");
  if (config.max_sentences > 0) total_ = std::min(total_, config.max_sentences);
  std::vector<int64_t> mine;
  for (int64_t i = comm.rank(); i < total_; i += comm.size()) mine.push_back(i);
  pairs_ = corpus.read("valid", mine);
  if (comm.rank() == 0) {
    std::vector<int64_t> all(static_cast<size_t>(total_));
    std::iota(all.begin(), all.end(), 0);
    for (const auto& pair : corpus.read("valid", all)) {
      references_.push_back(vocab_.decode(pair.tgt, data::Side::kTarget));
      if (static_cast<int64_t>(sample_sources_.size()) < config.samples) {
        sample_sources_.push_back(vocab_.decode(pair.src, data::Side::kSource));
      }
    }
  }
}

ValidationResult Validator::run(model::Transformer& model) {
  const auto started = std::chrono::steady_clock::now();
  ValidationResult result;
  result.sentences = total_;
  measure_loss(model, result);
  score_translations(model, result);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

void Validator::measure_loss(model::Transformer& model, ValidationResult& result) {
  const auto forced = eval::teacher_forced(model, pairs_, max_tokens_);
  auto sums = torch::tensor(
      {forced.loss * static_cast<double>(forced.tokens),
       forced.accuracy * static_cast<double>(forced.tokens), static_cast<double>(forced.tokens)},
      torch::kFloat64);
  comm_.all_reduce_sum(sums);
  const double tokens = std::max(1.0, sums[2].item<double>());
  result.loss = sums[0].item<double>() / tokens;
  result.perplexity = std::exp(std::min(result.loss, 100.0));
  result.accuracy = sums[1].item<double>() / tokens;
}

void Validator::score_translations(model::Transformer& model, ValidationResult& result) {
  decode::DecodeOptions options;
  options.beam_size = config_.beam;
  std::vector<std::vector<int32_t>> sources;
  for (const auto& pair : pairs_) sources.push_back(pair.src);
  const nlohmann::json mine = eval::translate_tokens(model, vocab_, std::move(sources), options);
  const auto gathered = comm_.gather_bytes(mine.dump(), 0);
  auto scores = torch::zeros({2}, torch::kFloat64);
  if (comm_.rank() == 0) {
    const auto hypotheses = in_corpus_order(gathered);
    scores[0] = eval::corpus_bleu(hypotheses, references_).score;
    scores[1] = eval::corpus_chrf(hypotheses, references_);
    for (size_t i = 0; i < sample_sources_.size(); ++i) {
      result.samples.push_back({sample_sources_[i], references_[i], hypotheses[i]});
    }
  }
  comm_.broadcast(scores, 0);
  result.bleu = scores[0].item<double>();
  result.chrf = scores[1].item<double>();
}

// Rank r translated global pairs r, r + N, ...
std::vector<std::string> Validator::in_corpus_order(
    const std::vector<std::string>& gathered) const {
  std::vector<std::vector<std::string>> shards;
  for (const auto& bytes : gathered) shards.push_back(nlohmann::json::parse(bytes));
  std::vector<std::string> hypotheses;
  for (int64_t i = 0; i < total_; ++i) {
    hypotheses.push_back(shards[i % comm_.size()][i / comm_.size()]);
  }
  return hypotheses;
}

}  // namespace tandem::train
