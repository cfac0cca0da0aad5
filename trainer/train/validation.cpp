#include "trainer/train/validation.h"

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/common/log.h"

namespace tandem::train {
namespace {

// A table cell: pipes escaped, line breaks as spaces.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') {
      out += "\\|";
    } else {
      out += c == '\n' || c == '\r' ? ' ' : c;
    }
  }
  return out;
}

// valid.metric's direction, when it names one or the mean, must be among the file's several;
// std::invalid_argument naming the key, the corpus and the file's corpora otherwise.
void check_metric_corpus(const config::ValidMetricChoice& metric, const data::Corpus& corpus) {
  if (metric.over.empty()) return;
  const data::Directions& directions = corpus.directions();
  const std::string text = config::to_text(metric);
  if (!directions.several()) {
    throw std::invalid_argument("valid.metric: '" + text + "' needs several corpora, and '" +
                                corpus.path() + "' holds one (use bleu, chrf or loss)");
  }
  if (metric.over != "mean" && directions.find(metric.over) == nullptr) {
    throw std::invalid_argument("valid.metric: '" + text + "': no corpus '" + metric.over +
                                "' in '" + corpus.path() +
                                "' (its corpora: " + directions.listed() + ")");
  }
}

}  // namespace

Validation::Validation(const data::Corpus& corpus, const config::Config& config,
                       parallel::Communicator& comm)
    : keep_best_(config.valid.metric, config.valid.patience) {
  if (config.valid.every_steps > 0) {
    check_metric_corpus(config.valid.metric, corpus);
    validator_ = std::make_unique<Validator>(corpus, config.valid, config.data.max_tokens, comm);
  }
}

ValidationOutcome Validation::run(model::Transformer& model, int64_t step) {
  ValidationOutcome outcome;
  outcome.step = step;
  outcome.result = validator_->run(model);
  outcome.verdict = keep_best_.record(step, outcome.result);
  return outcome;
}

void Validation::log(const ValidationOutcome& outcome) const {
  const ValidationResult& r = outcome.result;
  const std::string metric_text = config::to_text(keep_best_.metric());
  const char* metric = metric_text.c_str();
  char line[256];
  std::snprintf(
      line, sizeof line,
      "validation at step %lld: loss %.4f | ppl %.2f | acc %.1f%% | BLEU %.2f | chrF2 %.2f"
      " | %zu sentences in %.1fs | best %s at step %lld%s",
      static_cast<long long>(outcome.step), r.loss, r.perplexity, 100.0 * r.accuracy, r.bleu,
      r.chrf, static_cast<size_t>(r.sentences), r.seconds, metric,
      static_cast<long long>(keep_best_.best_step()),
      outcome.verdict.improved ? " (new best)" : "");
  log::info(line);
  for (const DirectionResult& d : r.directions) {
    std::snprintf(
        line, sizeof line,
        "  %s: loss %.4f | ppl %.2f | acc %.1f%% | BLEU %.2f | chrF2 %.2f | %lld sentences",
        d.name.c_str(), d.loss, d.perplexity, 100.0 * d.accuracy, d.bleu, d.chrf,
        static_cast<long long>(d.sentences));
    log::info(line);
  }
  if (!r.directions.empty()) {
    std::snprintf(line, sizeof line, "  mean of %zu directions: BLEU %.2f | chrF2 %.2f",
                  r.directions.size(), r.mean.bleu, r.mean.chrf);
    log::info(line);
  }
  if (outcome.verdict.stop_early) {
    log::info("early stopping: " + std::to_string(keep_best_.bad_validations()) +
              " validations without improvement of " + metric);
  }
}

nlohmann::json Validation::record(const ValidationOutcome& outcome) const {
  const ValidationResult& r = outcome.result;
  nlohmann::json record = {{"step", outcome.step},       {"valid_loss", r.loss},
                           {"valid_ppl", r.perplexity},  {"valid_accuracy", r.accuracy},
                           {"valid_bleu", r.bleu},       {"valid_chrf", r.chrf},
                           {"valid_seconds", r.seconds}, {"best_step", keep_best_.best_step()}};
  // Each direction's as valid_<name>_<figure> (TensorBoard: valid/<name>_<figure>).
  for (const DirectionResult& d : r.directions) {
    const std::string key = "valid_" + d.name + "_";
    record[key + "loss"] = d.loss;
    record[key + "ppl"] = d.perplexity;
    record[key + "accuracy"] = d.accuracy;
    record[key + "bleu"] = d.bleu;
    record[key + "chrf"] = d.chrf;
  }
  if (!r.directions.empty()) {
    record["valid_mean_bleu"] = r.mean.bleu;
    record["valid_mean_chrf"] = r.mean.chrf;
  }
  return record;
}

std::string Validation::samples_markdown(const ValidationOutcome& outcome) {
  if (outcome.result.samples.empty()) return "";
  std::string table = "| source | reference | translation |\n|---|---|---|\n";
  for (const auto& sample : outcome.result.samples) {
    table += "| " + cell(sample.source) + " | " + cell(sample.reference) + " | " +
             cell(sample.translation) + " |\n";
  }
  return table;
}

}  // namespace tandem::train
