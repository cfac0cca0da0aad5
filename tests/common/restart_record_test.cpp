// The launcher's restart record: what it writes to metrics.jsonl reads back the same, its
// TensorBoard line says what happened, and a record it could not have written is refused.
#include "trainer/train/restart_record.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tandem::train {
namespace {

TEST(RestartRecord, ReadsBackWhatItWritesAndSaysItInOneLine) {
  RestartRecord r;
  r.restart = 2;
  r.step = 40;
  r.failure = "rank 1 on b: killed by signal 9 (Killed)";
  r.how = "killed by signal 9 (Killed)";
  r.world_size = 1;
  r.accum_steps = 2;
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
  EXPECT_EQ(back.failed_step, -1);
  EXPECT_EQ(back.text(),
            "restart 2 at step 40: rank 1 on b: killed by signal 9 (Killed); relaunched on 1 "
            "rank(s), 2 accumulation step(s), without b (no answer on port 22) "
            "(2026-11-29T06:00:00Z)");
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
}  // namespace tandem::train
