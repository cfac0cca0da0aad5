// Progress of training over a logging window: the line rank 0 prints and the JSONL record it
// writes (step, epoch, loss, perplexity, accuracy, lr, grad norm, target tokens/s, elapsed, ETA).
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <string>

#include "trainer/config/config.h"

namespace tandem::train {

// Sums over all ranks for one optimizer step.
struct StepStats {
  double tgt_tokens = 0;
  double nll_sum = 0;
  double correct = 0;
  double grad_norm = 0;
  double lr = 0;
  bool skipped = false;  // non-finite gradient norm: no update on any rank
};

struct ProgressRecord {
  int64_t step = 0;
  double epoch = 0;          // fractional epochs completed
  double loss = 0;           // mean NLL per target token over the window (nats)
  double perplexity = 0;
  double accuracy = 0;       // target-token accuracy over the window
  double lr = 0;
  double grad_norm = 0;      // mean over the window's steps
  double tokens_per_s = 0;   // target tokens, all ranks
  double elapsed_s = 0;      // since this process started training
  double eta_s = -1;         // -1 when no step/time limit is set
  std::string line() const;
  nlohmann::json json() const;
};

class ProgressMeter {
 public:
  ProgressMeter(const config::Config& config, int64_t start_step);
  void add(const StepStats& stats);
  // The window's record; starts a new window.
  ProgressRecord take(int64_t step, double epoch);
  // One line for the end of training: steps run, tokens, mean speed, elapsed.
  std::string summary(int64_t step, double epoch) const;

 private:
  using Clock = std::chrono::steady_clock;
  double max_steps_;
  double max_minutes_;
  int64_t start_step_;
  Clock::time_point started_;
  Clock::time_point window_start_;
  StepStats window_;
  int64_t window_steps_ = 0;
  double total_tokens_ = 0;
};

// "1h02m03s" style durations.
std::string format_duration(double seconds);

}  // namespace tandem::train
