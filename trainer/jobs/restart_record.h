// The launcher's record of a restart (jobs/restarts.h), one JSON line in the job's records:
// training's metrics.jsonl ("event": "restart", counted in steps), a file job's
// OUTPUT.parts/restarts.jsonl (counted in chunks). One type for its one writer (the launcher) and
// its readers (the metrics log's TensorBoard text, the file job's summary).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/jobs/job_unit.h"

namespace tandem::jobs {

struct RestartRecord {
  JobUnit unit = JobUnit::kStep;  // what `from` and `failed_in` count
  int restart = 0;                // 1 for the first restart of the job
  int64_t from = 0;               // what it resumes from: the checkpoint's step, the chunks done
  std::string failure;            // what failed, as the launcher's restart line says it
  std::string how;         // how it failed: "killed by signal 9 (Killed)", "exited with code 1"
  int ranks = 0;           // ranks of the relaunched job
  std::string time;        // ISO 8601 UTC, when the launcher relaunched
  int rank = -1;           // the rank that failed first; -1: none was named
  std::string host;        // its host, or the host that became unreachable; "" when not named
  int64_t failed_in = -1;  // the step or chunk it failed in; -1 when it could not say
  std::vector<std::string> dropped_hosts;  // hosts left out, each "name (why)"
  // What the relaunch set on the ranks' command line, as the job names it (training's
  // {"accum_steps": 2}); its keys are the record's own.
  nlohmann::json settings = nlohmann::json::object();

  // The record: "event", the fields above named as the unit's records name them (steps: "step",
  // "world_size", "failed_step"; chunks: "chunks_done", "ranks", "failed_chunk"), the optional
  // ones only when known, and the settings.
  nlohmann::json to_json() const;
  // Back from a record to_json wrote; std::invalid_argument for one it could not have.
  static RestartRecord from_json(const nlohmann::json& record);
  // TensorBoard's line: "restart 2 at step 40: rank 1 on b: killed by signal 9 (Killed);
  // relaunched on 1 rank(s)<settings>, without b (no answer) (2026-11-29T06:00:00Z)", where
  // `settings` are the job's words for its settings (", 2 accumulation step(s)").
  std::string text(const std::string& settings = "") const;
};

}  // namespace tandem::jobs
