// Progress of training over a logging window: the line rank 0 prints and the JSONL record it
// writes (step, epoch, loss, perplexity, accuracy, lr, grad norm, target tokens/s, elapsed, ETA),
// and on a terminal a live line redrawn in place every step (log::status; TANDEM_PROGRESS).
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

// What the live line shows: the current window's loss and speed, and how far the run has come.
struct LiveView {
  int64_t step = 0;
  int64_t max_steps = 0;     // 0: no step limit (the step is shown alone)
  double epoch = 0;          // fractional epochs completed
  double loss = 0;           // mean NLL per target token since the last record (nats)
  double lr = 0;
  double tokens_per_s = 0;   // target tokens, all ranks
  double fraction = -1;      // of the run done, 0..1, by the nearest limit; -1 when none is set
  double eta_s = -1;         // -1 when no limit is set
  // "step 120/480 [###---------]  25% | ETA 1m02s | loss 3.2143 | 5321 tok/s | epoch 1.33 |
  //  lr 3.00e-04" (bar and ETA only when a limit gives an end), most important first: fields
  // that would reach past `width` columns are left out whole.
  std::string line(size_t width = std::string::npos) const;
};

class ProgressMeter {
 public:
  // Throws std::invalid_argument for a bad TANDEM_PROGRESS (see log::progress_mode_from_env).
  ProgressMeter(const config::Config& config, int64_t start_step);
  ~ProgressMeter();  // erases the live line, e.g. when training ends by an exception
  void add(const StepStats& stats);
  // The window's record; starts a new window.
  ProgressRecord take(int64_t step, double epoch);
  // Rank 0 on a terminal: redraws the live line (at most every 100 ms); otherwise nothing.
  // Call once per step, after add() (and take(), when due).
  void show(int64_t step, double epoch);
  // The live line's content now; what show() draws.
  LiveView view(int64_t step, double epoch) const;
  // One line for the end of training: steps run, tokens, mean speed, elapsed. Ends the live
  // line, so that it is the last thing on the terminal.
  std::string summary(int64_t step, double epoch) const;

 private:
  using Clock = std::chrono::steady_clock;
  double max_steps_;
  double max_minutes_;
  int64_t start_step_;
  Clock::time_point started_;
  Clock::time_point window_start_;
  double eta(int64_t step, double elapsed_s) const;  // -1 without a step or time limit

  double max_epochs_;
  bool live_;                // show() draws
  Clock::time_point last_shown_;
  double first_epoch_ = -1;  // at the first show(), for the epoch-limit ETA
  StepStats window_;
  int64_t window_steps_ = 0;
  double total_tokens_ = 0;
  ProgressRecord last_record_;  // what the live line shows while a new window is empty
};

// "1h02m03s" style durations.
std::string format_duration(double seconds);

}  // namespace tandem::train
