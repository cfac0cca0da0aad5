#include "trainer/train/cadence.h"

#include <utility>

#include "trainer/jobs/stop_handler.h"

namespace tandem::train {

Cadence::Cadence(const config::Config& config, int rank, std::function<Clock::time_point()> now)
    : rank_(rank),
      now_(std::move(now)),
      log_every_(config.log.every_steps),
      check_every_(config.dist.check_every_steps),
      valid_every_(config.valid.every_steps),
      save_every_(config.checkpoint.every_steps),
      max_steps_(config.train.max_steps),
      max_epochs_(config.train.max_epochs),
      max_minutes_(config.train.max_minutes),
      save_every_minutes_(config.checkpoint.every_minutes) {}

void Cadence::start() {
  started_ = now_();
  last_save_ = started_;
}

double Cadence::seconds_since(Clock::time_point since) const {
  return std::chrono::duration<double>(now_() - since).count();
}

// The clocks are rank 0's alone: its vote reaches every rank through the agreement, and other
// ranks' clocks, read at other instants, could otherwise disagree about the same step.
StepVotes Cadence::local_votes() const {
  StepVotes votes;
  votes.stop = jobs::stop_signal() != 0 ||
               (rank_ == 0 && max_minutes_ > 0 && seconds_since(started_) >= max_minutes_ * 60.0);
  votes.save = rank_ == 0 && save_every_minutes_ > 0 &&
               seconds_since(last_save_) >= save_every_minutes_ * 60.0;
  return votes;
}

bool Cadence::save_due(int64_t step) const {
  const bool on_schedule = save_every_ > 0 && step % save_every_ == 0;
  return (agreed_.save || on_schedule) && !saved_at(step);
}

void Cadence::record_save(int64_t step) {
  saved_step_ = step;
  last_save_ = now_();
}

bool Cadence::should_stop(int64_t step, int64_t completed_epochs, bool stop_early) const {
  if (agreed_.stop || stop_early) return true;
  if (max_steps_ > 0 && step >= max_steps_) return true;
  return max_epochs_ > 0 && completed_epochs >= max_epochs_;
}

}  // namespace tandem::train
