#include "trainer/train/validator.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/eval/bleu_chrf.h"
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
  if (!corpus.has_split("valid")) {
    throw std::invalid_argument("valid.every_steps is " + std::to_string(config.every_steps) +
                                " but corpus '" + corpus.path() +
                                "' has no valid split (tandem-prep --valid-src/--valid-tgt)");
  }
  // The pairs validated, in order: the split's first max_sentences, or each corpus's.
  const auto capped = [&config](int64_t count) {
    return config.max_sentences > 0 ? std::min(count, config.max_sentences) : count;
  };
  std::vector<int64_t> validated;
  const std::vector<data::CorpusPart> parts = corpus.corpora();
  for (const data::CorpusPart& part : parts.size() > 1 ? parts : std::vector<data::CorpusPart>{}) {
    const auto range = part.ranges.find("valid");
    if (range == part.ranges.end()) {
      throw std::invalid_argument(
          "valid.every_steps is " + std::to_string(config.every_steps) + " but corpus '" +
          part.name + "' of '" + corpus.path() +
          "' has no valid split (give it one in the tandem-prep --corpora manifest)");
    }
    const auto begin = static_cast<int64_t>(validated.size());
    for (int64_t i = 0; i < capped(range->second.second); ++i) {
      validated.push_back(range->second.first + i);
    }
    directions_.push_back({part.name, begin, static_cast<int64_t>(validated.size())});
  }
  if (directions_.empty()) {
    validated.resize(static_cast<size_t>(capped(corpus.size("valid"))));
    std::iota(validated.begin(), validated.end(), 0);
  }
  total_ = static_cast<int64_t>(validated.size());
  std::vector<int64_t> mine;
  for (int64_t j = comm.rank(); j < total_; j += comm.size()) mine.push_back(validated[j]);
  pairs_ = corpus.read("valid", mine);
  if (comm.rank() == 0) {
    for (const auto& pair : corpus.read("valid", validated)) {
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
  if (directions_.empty()) {
    add(eval::teacher_forced(model, pairs_, max_tokens_));
  } else {
    for (const Direction& d : directions_) {  // this rank's pairs are at positions rank + k N
      std::vector<data::SentencePair> share;
      for (size_t k = 0; k < pairs_.size(); ++k) {
        const int64_t position = comm_.rank() + static_cast<int64_t>(k) * comm_.size();
        if (position >= d.begin && position < d.end) share.push_back(pairs_[k]);
      }
      add(eval::teacher_forced(model, share, max_tokens_));
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
  if (directions_.empty()) {
    figures(0, result);
    return;
  }
  auto total = all.view({-1, 3}).sum(0);
  for (size_t d = 0; d < directions_.size(); ++d) {
    DirectionResult r;
    r.name = directions_[d].name;
    r.sentences = directions_[d].end - directions_[d].begin;
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
  const nlohmann::json mine = eval::translate_tokens(model, vocab_, std::move(sources), options);
  const auto gathered = comm_.gather_bytes(mine.dump(), 0);
  // BLEU and chrF2 of the whole set, then of each direction.
  auto scores = torch::zeros({2 * static_cast<int64_t>(1 + directions_.size())}, torch::kFloat64);
  if (comm_.rank() == 0) {
    const auto hypotheses = in_corpus_order(gathered);
    scores[0] = eval::corpus_bleu(hypotheses, references_).score;
    scores[1] = eval::corpus_chrf(hypotheses, references_);
    for (size_t d = 0; d < directions_.size(); ++d) {
      const auto begin = static_cast<std::ptrdiff_t>(directions_[d].begin);
      const auto end = static_cast<std::ptrdiff_t>(directions_[d].end);
      const std::vector<std::string> hyps(hypotheses.begin() + begin, hypotheses.begin() + end);
      const std::vector<std::string> refs(references_.begin() + begin, references_.begin() + end);
      scores[static_cast<int64_t>(2 + 2 * d)] = eval::corpus_bleu(hyps, refs).score;
      scores[static_cast<int64_t>(3 + 2 * d)] = eval::corpus_chrf(hyps, refs);
    }
    for (size_t i = 0; i < sample_sources_.size(); ++i) {
      result.samples.push_back({sample_sources_[i], references_[i], hypotheses[i]});
    }
  }
  comm_.broadcast(scores, 0);
  result.bleu = scores[0].item<double>();
  result.chrf = scores[1].item<double>();
  for (size_t d = 0; d < result.directions.size(); ++d) {
    result.directions[d].bleu = scores[static_cast<int64_t>(2 + 2 * d)].item<double>();
    result.directions[d].chrf = scores[static_cast<int64_t>(3 + 2 * d)].item<double>();
    result.mean_bleu += result.directions[d].bleu / static_cast<double>(result.directions.size());
    result.mean_chrf += result.directions[d].chrf / static_cast<double>(result.directions.size());
  }
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
