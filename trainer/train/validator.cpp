#include "trainer/train/validator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/corpus/language_marks.h"
#include "trainer/bleu/bleu_chrf.h"
#include "trainer/eval/evaluate.h"

namespace tandem::train {

double ValidationResult::score(const config::ValidMetricChoice& metric) const {
  const auto figure = [&](const ValidationFigures& f) {
    switch (metric.figure) {
      case config::ValidMetric::kLoss:
        return -f.loss;
      case config::ValidMetric::kChrf:
        return f.chrf;
      case config::ValidMetric::kBleu:
        break;
    }
    return f.bleu;
  };
  if (metric.over.empty()) return figure(*this);
  if (metric.over == "mean") {
    double sum = 0;
    for (const DirectionResult& d : directions) sum += figure(d);
    return directions.empty() ? figure(*this) : sum / static_cast<double>(directions.size());
  }
  for (const DirectionResult& d : directions) {
    if (d.name == metric.over) return figure(d);
  }
  throw std::invalid_argument("valid.metric: no corpus '" + metric.over +
                              "' among those validated");
}

Validator::Validator(const data::Corpus& corpus, const config::ValidConfig& config,
                     int64_t max_tokens, parallel::Communicator& comm)
    : vocab_(corpus.vocab()), config_(config), max_tokens_(max_tokens), comm_(comm) {
  // `what` ("corpus 'x.h5'") has no valid split; `hint` says how to give it one.
  const auto lacking = [&](const std::string& what, const std::string& hint) {
    return std::invalid_argument("valid.every_steps is " + std::to_string(config.every_steps) +
                                 " but " + what + " has no valid split (" + hint + ")");
  };
  if (!corpus.has_split("valid")) {
    throw lacking("corpus '" + corpus.path() + "'", "tandem-prep --valid-src/--valid-tgt");
  }
  // With several directions, every one is validated: each needs its valid pairs.
  const data::Directions& directions = corpus.directions();
  for (const data::Direction& direction : directions) {
    if (directions.several() && direction.range("valid") == nullptr) {
      throw lacking("corpus '" + direction.name + "' of '" + corpus.path() + "'",
                    "give it one in the tandem-prep --corpora manifest");
    }
  }
  // The pairs validated, in order: the split's first max_sentences, or each direction's.
  const eval::EvaluatedPairs validated =
      eval::evaluated_pairs(directions, "valid", config.max_sentences);
  slices_ = validated.slices;
  total_ = static_cast<int64_t>(validated.indices.size());
  std::vector<int64_t> mine;
  for (int64_t j = comm.rank(); j < total_; j += comm.size()) mine.push_back(validated.indices[j]);
  pairs_ = corpus.read("valid", mine);
  if (comm.rank() == 0) {
    for (const auto& pair : corpus.read("valid", validated.indices)) {
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
  // [NLL sum, correct, tokens] of the whole set, or of each direction in turn.
  std::vector<double> sums;
  const auto add = [&](const eval::TeacherForced& forced) {
    const auto tokens = static_cast<double>(forced.tokens);
    sums.insert(sums.end(), {forced.loss * tokens, forced.accuracy * tokens, tokens});
  };
  if (slices_.empty()) {
    add(eval::teacher_forced(model, pairs_, max_tokens_));
  } else {  // this rank's pairs are at positions rank + k N
    for (const eval::TeacherForced& forced : eval::teacher_forced_by_direction(
             model, pairs_, slices_, comm_.rank(), comm_.size(), max_tokens_)) {
      add(forced);
    }
  }
  auto all = torch::tensor(sums, torch::kFloat64);
  comm_.all_reduce_sum(all);
  const auto figures = [&all](int64_t at, ValidationFigures& f) {
    const double tokens = std::max(1.0, all[at + 2].item<double>());
    f.loss = all[at].item<double>() / tokens;
    f.perplexity = std::exp(std::min(f.loss, 100.0));
    f.accuracy = all[at + 1].item<double>() / tokens;
  };
  if (slices_.empty()) {
    figures(0, result);
    return;
  }
  auto total = all.view({-1, 3}).sum(0);
  for (size_t d = 0; d < slices_.size(); ++d) {
    DirectionResult r;
    r.name = slices_[d].name;
    r.sentences = slices_[d].size();
    figures(static_cast<int64_t>(3 * d), r);
    result.directions.push_back(r);
  }
  all = total;
  figures(0, result);
}

void Validator::score_translations(model::Transformer& model, ValidationResult& result) {
  decode::DecodeOptions options;
  options.beam_size = config_.beam;
  std::vector<std::vector<int32_t>> sources;
  for (const auto& pair : pairs_) sources.push_back(pair.src);
  const nlohmann::json mine =
      eval::translate_tokens(model, vocab_, std::move(sources), options,
                             decode::first_token_rows(data::target_codes(vocab_, pairs_)));
  const auto gathered = comm_.gather_bytes(mine.dump(), 0);
  // BLEU and chrF2 of the whole set, then of each direction.
  auto scores = torch::zeros({2 * static_cast<int64_t>(1 + slices_.size())}, torch::kFloat64);
  if (comm_.rank() == 0) {
    const auto hypotheses = in_corpus_order(gathered);
    scores[0] = eval::corpus_bleu(hypotheses, references_).score;
    scores[1] = eval::corpus_chrf(hypotheses, references_);
    const auto qualities = eval::quality_by_direction(slices_, hypotheses, references_);
    for (size_t d = 0; d < qualities.size(); ++d) {
      scores[static_cast<int64_t>(2 + 2 * d)] = qualities[d].bleu;
      scores[static_cast<int64_t>(3 + 2 * d)] = qualities[d].chrf;
    }
    for (size_t i = 0; i < sample_sources_.size(); ++i) {
      result.samples.push_back({sample_sources_[i], references_[i], hypotheses[i]});
    }
  }
  comm_.broadcast(scores, 0);
  result.bleu = scores[0].item<double>();
  result.chrf = scores[1].item<double>();
  std::vector<eval::Quality> qualities;
  for (size_t d = 0; d < result.directions.size(); ++d) {
    result.directions[d].bleu = scores[static_cast<int64_t>(2 + 2 * d)].item<double>();
    result.directions[d].chrf = scores[static_cast<int64_t>(3 + 2 * d)].item<double>();
    qualities.push_back({result.directions[d].bleu, result.directions[d].chrf});
  }
  result.mean = eval::mean_quality(qualities);
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
