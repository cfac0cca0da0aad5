#include "trainer/train/keep_best.h"

#include <stdexcept>
#include <utility>

#include "trainer/common/log.h"

namespace tandem::train {

KeepBest::KeepBest(config::ValidMetricChoice metric, int64_t patience)
    : metric_(std::move(metric)), patience_(patience) {}

ValidationVerdict KeepBest::record(int64_t step, const ValidationResult& result) {
  const double score = result.score(metric_);  // first: a metric it lacks changes nothing
  last_step_ = step;
  history_.push_back({{"step", step},
                      {"loss", result.loss},
                      {"ppl", result.perplexity},
                      {"accuracy", result.accuracy},
                      {"bleu", result.bleu},
                      {"chrf", result.chrf}});
  ValidationVerdict verdict;
  verdict.improved = best_step_ < 0 || score > best_score_;
  if (verdict.improved) {
    best_score_ = score;
    best_step_ = step;
    bad_validations_ = 0;
  } else {
    ++bad_validations_;
  }
  stop_early_ = patience_ > 0 && bad_validations_ >= patience_;
  verdict.stop_early = stop_early_;
  return verdict;
}

std::string KeepBest::to_json() const {
  if (history_.empty()) return "";
  return nlohmann::json{
      {"metric", config::to_text(metric_)},  {"best_step", best_step_}, {"best_score", best_score_},
      {"bad_validations", bad_validations_}, {"last_step", last_step_}, {"history", history_}}
      .dump();
}

void KeepBest::restore(const std::string& json, const std::string& source) {
  if (json.empty()) return;
  // Read whole before anything changes: a record that is not to_json's leaves this one as it was.
  nlohmann::json history;
  int64_t last_step = 0, best_step = 0, bad_validations = 0;
  double best_score = 0;
  std::string metric;
  try {
    const auto state = nlohmann::json::parse(json);
    history = state.at("history");
    if (!history.is_array()) throw std::invalid_argument("history is not a list");
    last_step = state.at("last_step").get<int64_t>();
    metric = state.at("metric").get<std::string>();
    best_step = state.at("best_step").get<int64_t>();
    best_score = state.at("best_score").get<double>();
    bad_validations = state.at("bad_validations").get<int64_t>();
  } catch (const std::exception& e) {  // nlohmann's parse, key and type errors, and the above
    throw std::invalid_argument(source + " is not the keep-best record Tandem writes: " + e.what());
  }
  history_ = std::move(history);
  last_step_ = last_step;
  if (metric != config::to_text(metric_)) {
    log::info("valid.metric changed from " + metric + " to " + config::to_text(metric_) +
              ": the best-checkpoint record starts anew");
    return;
  }
  best_step_ = best_step;
  best_score_ = best_score;
  bad_validations_ = bad_validations;
}

}  // namespace tandem::train
