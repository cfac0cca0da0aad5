#include "trainer/train/keep_best.h"

#include "trainer/common/log.h"

namespace tandem::train {

KeepBest::KeepBest(config::ValidMetric metric, int64_t patience)
    : metric_(metric), patience_(patience) {}

ValidationVerdict KeepBest::record(int64_t step, const ValidationResult& result) {
  last_step_ = step;
  history_.push_back({{"step", step},
                      {"loss", result.loss},
                      {"ppl", result.perplexity},
                      {"accuracy", result.accuracy},
                      {"bleu", result.bleu},
                      {"chrf", result.chrf}});
  const double score = result.score(metric_);
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
      {"metric", config::name_of(metric_)},  {"best_step", best_step_}, {"best_score", best_score_},
      {"bad_validations", bad_validations_}, {"last_step", last_step_}, {"history", history_}}
      .dump();
}

void KeepBest::restore(const std::string& json) {
  if (json.empty()) return;
  const auto state = nlohmann::json::parse(json);
  history_ = state.at("history");
  last_step_ = state.at("last_step");
  const std::string metric = state.at("metric");
  if (metric != config::name_of(metric_)) {
    log::info("valid.metric changed from " + metric + " to " + config::name_of(metric_) +
              ": the best-checkpoint record starts anew");
    return;
  }
  best_step_ = state.at("best_step");
  best_score_ = state.at("best_score");
  bad_validations_ = state.at("bad_validations");
}

}  // namespace tandem::train
