// The launcher's record of a restart in metrics.jsonl ("event": "restart"): one type for its one
// writer (the launcher, jobs/restarts) and its one reader (the metrics log's TensorBoard text).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace tandem::train {

struct RestartRecord {
  int restart = 0;           // 1 for the first restart of the job
  int64_t step = 0;          // the checkpoint step it resumes from; 0: from scratch
  std::string failure;       // what failed, as the launcher's restart line says it
  std::string how;           // how it failed: "killed by signal 9 (Killed)", "exited with code 1"
  int world_size = 0;        // ranks of the relaunched job
  int64_t accum_steps = 1;   // its train.accum_steps
  std::string time;          // ISO 8601 UTC, when the launcher relaunched
  int rank = -1;             // the rank that failed first; -1: none was named
  std::string host;          // its host, or the host that became unreachable; "" when not named
  int64_t failed_step = -1;  // the step it failed in; -1 when it could not say
  std::vector<std::string> dropped_hosts;  // hosts left out, each "name (why)"

  // The metrics.jsonl record: "event", the fields above, the optional ones only when known.
  nlohmann::json to_json() const;
  // Back from a record to_json wrote; std::invalid_argument for one it could not have.
  static RestartRecord from_json(const nlohmann::json& record);
  // TensorBoard's line: "restart 2 at step 40: rank 1 on b: killed by signal 9 (Killed); relaunched
  // on 1 rank(s), 2 accumulation step(s), without b (no answer) (2026-11-29T06:00:00Z)".
  std::string text() const;
};

}  // namespace tandem::train
