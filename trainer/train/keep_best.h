// Keep-best and early stopping: every validation's figures, the best score and its step, and the
// validations in a row without improvement; the state travels in checkpoints.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "trainer/config/config.h"
#include "trainer/train/validator.h"

namespace tandem::train {

// Keep-best and early stopping: every validation's figures, the best score of valid.metric and
// its step, and the validations in a row without improvement. Every rank records the same
// results, so all decide alike; the state travels in checkpoints (/validation, JSON), so both
// decisions continue across restarts.

struct ValidationVerdict {
  bool improved = false;    // the best so far: best.h5 becomes this step's checkpoint
  bool stop_early = false;  // valid.patience validations in a row without improvement
};

class KeepBest {
 public:
  // metric: valid.metric; patience 0: never stop early.
  KeepBest(config::ValidMetricChoice metric, int64_t patience);

  // Records the validation of `step` and decides.
  ValidationVerdict record(int64_t step, const ValidationResult& result);

  const config::ValidMetricChoice& metric() const { return metric_; }
  int64_t best_step() const { return best_step_; }  // -1 before any validation
  int64_t last_step() const { return last_step_; }  // -1 before any validation
  int64_t bad_validations() const { return bad_validations_; }
  bool stop_early() const { return stop_early_; }  // as the last record() decided

  // The checkpoint's /validation text: "" before any validation.
  std::string to_json() const;
  // Continues from a checkpoint's /validation text ("" changes nothing). When that run followed
  // another metric, its history is kept but the best and the count start anew (logged). Text that
  // is not to_json's is std::invalid_argument naming `source` ("checkpoint 'x.h5' /validation"),
  // and changes nothing.
  void restore(const std::string& json, const std::string& source);

 private:
  config::ValidMetricChoice metric_;
  int64_t patience_;
  nlohmann::json history_ = nlohmann::json::array();
  int64_t last_step_ = -1;
  int64_t best_step_ = -1;
  double best_score_ = 0;
  int64_t bad_validations_ = 0;
  bool stop_early_ = false;
};

}  // namespace tandem::train
