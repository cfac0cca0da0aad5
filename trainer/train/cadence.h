// When the training loop logs, checks the ranks, validates, saves and stops (Marian's Scheduler):
// the config's cadence in steps and minutes, the signals that ask for a stop, and the decisions
// every rank agreed on at the last step. The loop asks; this object answers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "trainer/config/config.h"
#include "trainer/train/agreement.h"

namespace tandem::train {

class Cadence {
 public:
  using Clock = std::chrono::steady_clock;

  // `now` is the clock of the minute limits (tests pass their own).
  Cadence(const config::Config& config, int rank,
          std::function<Clock::time_point()> now = Clock::now);

  // Training starts: the clocks of train.max_minutes and checkpoint.every_minutes start at 0.
  void start();

  // This rank's votes after its backward pass: stop on a signal (any rank) or at train.max_minutes
  // (rank 0's clock); save when checkpoint.every_minutes have passed since the last save (rank 0).
  StepVotes local_votes() const;
  // What all ranks agreed on for this step (agree_across_ranks); the answers below follow it.
  void agree(const StepVotes& agreed) { agreed_ = agreed; }

  bool log_due(int64_t step) const { return step % log_every_ == 0; }
  bool check_due(int64_t step) const { return check_every_ > 0 && step % check_every_ == 0; }
  bool validate_due(int64_t step) const { return valid_every_ > 0 && step % valid_every_ == 0; }
  // checkpoint.every_steps or an agreed save vote, unless `step` is saved already.
  bool save_due(int64_t step) const;

  // A checkpoint of `step` is being written now (its clock restarts) or was resumed from.
  void record_save(int64_t step);
  void record_resume(int64_t step) { saved_step_ = step; }
  bool saved_at(int64_t step) const { return saved_step_ == step; }

  // train.max_steps or train.max_epochs reached, an agreed stop, or early stopping.
  bool should_stop(int64_t step, int64_t completed_epochs, bool stop_early) const;
  bool stop_agreed() const { return agreed_.stop; }

 private:
  double seconds_since(Clock::time_point since) const;

  int rank_;
  std::function<Clock::time_point()> now_;
  int64_t log_every_, check_every_, valid_every_, save_every_;
  int64_t max_steps_, max_epochs_;
  double max_minutes_, save_every_minutes_;
  Clock::time_point started_;
  Clock::time_point last_save_;
  int64_t saved_step_ = -1;
  StepVotes agreed_;
};

}  // namespace tandem::train
