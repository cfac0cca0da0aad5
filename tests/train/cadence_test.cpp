// The training loop's cadence: what is due at which step, what each rank votes and when, and the
// stop conditions, on a clock the test moves by hand.
#include "trainer/train/cadence.h"

#include <gtest/gtest.h>

namespace tandem::train {
namespace {

using Clock = Cadence::Clock;

// A clock that stands still until the test moves it.
struct ManualClock {
  Clock::time_point now = Clock::time_point() + std::chrono::hours(1);
  void advance_ms(int64_t ms) { now += std::chrono::milliseconds(ms); }
};

config::Config cadence_config() {
  config::Config c;
  c.data.corpus = "c.h5";
  c.log.every_steps = 5;
  c.dist.check_every_steps = 4;
  c.valid.every_steps = 6;
  c.checkpoint.every_steps = 10;
  return c;
}

Cadence make_cadence(const config::Config& config, int rank, ManualClock& clock) {
  return Cadence(config, rank, [&clock] { return clock.now; });
}

TEST(Cadence, LogsChecksValidatesAndSavesAtTheirMultiples) {
  ManualClock clock;
  const Cadence cadence = make_cadence(cadence_config(), 0, clock);
  EXPECT_TRUE(cadence.log_due(5));
  EXPECT_TRUE(cadence.log_due(10));
  EXPECT_FALSE(cadence.log_due(7));
  EXPECT_TRUE(cadence.check_due(8));
  EXPECT_FALSE(cadence.check_due(6));
  EXPECT_TRUE(cadence.validate_due(12));
  EXPECT_FALSE(cadence.validate_due(10));
  EXPECT_TRUE(cadence.save_due(20));
  EXPECT_FALSE(cadence.save_due(15));
}

TEST(Cadence, ZeroTurnsChecksValidationAndPeriodicSavesOff) {
  config::Config c = cadence_config();
  c.dist.check_every_steps = 0;
  c.valid.every_steps = 0;
  c.checkpoint.every_steps = 0;
  ManualClock clock;
  const Cadence cadence = make_cadence(c, 0, clock);
  for (int64_t step = 1; step <= 100; ++step) {
    EXPECT_FALSE(cadence.check_due(step) || cadence.validate_due(step) || cadence.save_due(step))
        << "step " << step;
  }
}

TEST(Cadence, AStepIsSavedOnceWhicheverWayTheSaveCame) {
  ManualClock clock;
  Cadence cadence = make_cadence(cadence_config(), 0, clock);
  cadence.record_save(20);  // e.g. by validation, just before the periodic save
  EXPECT_TRUE(cadence.saved_at(20));
  EXPECT_FALSE(cadence.save_due(20));
  cadence.record_resume(30);
  EXPECT_TRUE(cadence.saved_at(30));
  EXPECT_FALSE(cadence.save_due(30));
  EXPECT_TRUE(cadence.save_due(40));
}

TEST(Cadence, OnlyRankZerosClocksVoteForTimeLimitsAndTimedSaves) {
  config::Config c = cadence_config();
  c.train.max_minutes = 2;
  c.checkpoint.every_minutes = 0.5;
  ManualClock clock;
  Cadence rank0 = make_cadence(c, 0, clock);
  Cadence rank1 = make_cadence(c, 1, clock);
  rank0.start();
  rank1.start();
  clock.advance_ms(29900);
  EXPECT_FALSE(rank0.local_votes().save);
  clock.advance_ms(100);  // 30 s: a timed save is due
  EXPECT_TRUE(rank0.local_votes().save);
  EXPECT_FALSE(rank1.local_votes().save);
  rank0.record_save(7);  // the save restarts its clock
  EXPECT_FALSE(rank0.local_votes().save);
  clock.advance_ms(90000);  // 120 s since the start: the time limit
  EXPECT_TRUE(rank0.local_votes().stop);
  EXPECT_FALSE(rank1.local_votes().stop);
}

TEST(Cadence, AgreedVotesDecideOnEveryRank) {
  ManualClock clock;
  Cadence cadence = make_cadence(cadence_config(), 1, clock);
  EXPECT_FALSE(cadence.save_due(7));
  EXPECT_FALSE(cadence.should_stop(7, 0, false));
  cadence.agree(StepVotes{/*stop=*/true, /*save=*/true});
  EXPECT_TRUE(cadence.save_due(7));
  EXPECT_TRUE(cadence.should_stop(7, 0, false));
  EXPECT_TRUE(cadence.stop_agreed());
  cadence.agree(StepVotes{});
  EXPECT_FALSE(cadence.should_stop(7, 0, false));
}

TEST(Cadence, StopsAtTheStepOrEpochLimitOrWhenValidationSaysSo) {
  config::Config c = cadence_config();
  c.train.max_steps = 50;
  c.train.max_epochs = 3;
  ManualClock clock;
  const Cadence cadence = make_cadence(c, 0, clock);
  EXPECT_FALSE(cadence.should_stop(49, 2, false));
  EXPECT_TRUE(cadence.should_stop(50, 2, false));
  EXPECT_TRUE(cadence.should_stop(10, 3, false));
  EXPECT_TRUE(cadence.should_stop(10, 0, true));
  c.train.max_steps = 0;  // no limit from this key
  c.train.max_epochs = 0;
  EXPECT_FALSE(make_cadence(c, 0, clock).should_stop(1000000, 1000, false));
}

}  // namespace
}  // namespace tandem::train
