// The launcher's restart record: what it writes to metrics.jsonl (in steps) or a file job's
// restarts.jsonl (in chunks) reads back the same, its TensorBoard line says what happened, and a
// record it could not have written is refused.
#include "trainer/jobs/restart_record.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tandem::jobs {
namespace {

TEST(RestartRecord, ReadsBackWhatItWritesAndSaysItInOneLine) {
  RestartRecord r;
  r.restart = 2;
  r.from = 40;
  r.failure = "rank 1 on b: killed by signal 9 (Killed)";
  r.how = "killed by signal 9 (Killed)";
  r.ranks = 1;
  r.settings = {{"accum_steps", 2}};
  r.time = "2026-11-29T06:00:00Z";
  r.rank = 1;
  r.host = "b";
  r.dropped_hosts = {"b (no answer on port 22)"};
  const nlohmann::json json = r.to_json();
  EXPECT_EQ(json["event"], "restart");
  EXPECT_TRUE(json["dropped_hosts"].is_array());
  EXPECT_FALSE(json.contains("failed_step"));  // not known: left out
  const RestartRecord back = RestartRecord::from_json(json);
  EXPECT_EQ(back.to_json(), json);
  EXPECT_EQ(back.failed_in, -1);
  EXPECT_EQ(json["world_size"], 1);
  EXPECT_EQ(json["accum_steps"], 2);
  EXPECT_EQ(back.text(", 2 accumulation step(s)"),
            "restart 2 at step 40: rank 1 on b: killed by signal 9 (Killed); relaunched on 1 "
            "rank(s), 2 accumulation step(s), without b (no answer on port 22) "
            "(2026-11-29T06:00:00Z)");
}

// A file job's record counts in chunks, under its own names, and reads back as one.
TEST(RestartRecord, AFileJobsRecordCountsInChunks) {
  RestartRecord r;
  r.unit = JobUnit::kChunk;
  r.restart = 1;
  r.from = 37;
  r.failure = "rank 0: exited with code 1 in chunk 40 (disk full)";
  r.how = "exited with code 1";
  r.ranks = 2;
  r.time = "2026-12-06T14:00:00Z";
  r.rank = 0;
  r.failed_in = 40;
  const nlohmann::json json = r.to_json();
  EXPECT_EQ(json, (nlohmann::json{{"event", "restart"},
                                  {"restart", 1},
                                  {"chunks_done", 37},
                                  {"failure", r.failure},
                                  {"how", "exited with code 1"},
                                  {"ranks", 2},
                                  {"time", "2026-12-06T14:00:00Z"},
                                  {"rank", 0},
                                  {"failed_chunk", 40}}));
  const RestartRecord back = RestartRecord::from_json(json);
  EXPECT_EQ(back.unit, JobUnit::kChunk);
  EXPECT_TRUE(back.settings.empty());
  EXPECT_EQ(back.to_json(), json);
}

TEST(RestartRecord, RefusesARecordTheLauncherCouldNotHaveWritten) {
  EXPECT_THROW(RestartRecord::from_json({{"event", "restart"}, {"step", 3}}),
               std::invalid_argument);
  nlohmann::json scalar = RestartRecord{}.to_json();
  scalar["dropped_hosts"] = "b";  // a string where the launcher writes a list
  EXPECT_THROW(RestartRecord::from_json(scalar), std::invalid_argument);
  EXPECT_THROW(RestartRecord::from_json({{"step", 3}, {"loss", 1.5}}), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::jobs
