// The rank's state record for the launcher: written once, whole, where TANDEM_STATE_DIR says, and
// read back as written; nothing without the variable; a file that is not a record is left out.
#include "trainer/jobs/rank_state.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::jobs {
namespace {

TEST(RankState, TheFirstEndIsTheRecordAndReadsBackAsWritten) {
  TempDir dir("rank-state");
  setenv(kRankStateDirVariable, dir.path().c_str(), 1);
  rank_state::open(3, "node07");
  unsetenv(kRankStateDirVariable);  // read once, by open()
  EXPECT_TRUE(rank_state::end(RankState::Outcome::kFailed, 25, 1, 0,
                              "fault injected at step 25 on rank 3"));
  // A second end (a watchdog firing while the main thread reports) changes nothing.
  EXPECT_FALSE(rank_state::end(RankState::Outcome::kFinished, 30, 0));
  std::ofstream(dir.file("rank-1.json")) << "{\"rank\": 1, \"outcome\": \"done\"}";  // not one
  std::ofstream(dir.file("notes.txt")) << "not a record's name";
  const auto states = read_rank_states(dir.path());
  ASSERT_EQ(states.size(), 1u);
  EXPECT_EQ(states[0].rank, 3);
  EXPECT_EQ(states[0].host, "node07");
  EXPECT_EQ(states[0].outcome, RankState::Outcome::kFailed);
  EXPECT_EQ(states[0].at, 25);
  EXPECT_EQ(states[0].exit_code, 1);
  EXPECT_EQ(states[0].error, "fault injected at step 25 on rank 3");
  EXPECT_GT(states[0].time, 1.7e9);  // seconds since the epoch, after 2023
  EXPECT_TRUE(read_rank_states(dir.file("missing")).empty());
}

TEST(RankState, JsonRoundTripAndRefusal) {
  RankState stopped;
  stopped.rank = 0;
  stopped.host = "a";
  stopped.outcome = RankState::Outcome::kStopped;
  stopped.at = 40;
  stopped.exit_code = 143;
  stopped.signal = 15;
  stopped.time = 1795932137.25;
  const RankState back = rank_state_from_json(to_json(stopped), "test");
  EXPECT_EQ(back.outcome, RankState::Outcome::kStopped);
  EXPECT_EQ(back.at, 40);
  EXPECT_EQ(back.signal, 15);
  EXPECT_EQ(back.time, 1795932137.25);
  EXPECT_STREQ(outcome_name(RankState::Outcome::kFinished), "finished");
  EXPECT_THROW(rank_state_from_json("{\"rank\": 0}", "test"), std::invalid_argument);
  EXPECT_THROW(rank_state_from_json("not json", "test"), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::jobs
