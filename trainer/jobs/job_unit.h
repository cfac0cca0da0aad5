// What a job counts its progress in: training's steps, a file job's chunks. The ranks' state
// records (jobs/rank_state.h), the restart records (jobs/restart_record.h) and the launcher's
// lines (jobs/) say a job's place in its unit.
#pragma once

namespace tandem::jobs {

enum class JobUnit { kStep, kChunk };

// "step", "chunk".
inline const char* unit_name(JobUnit unit) { return unit == JobUnit::kChunk ? "chunk" : "step"; }

}  // namespace tandem::jobs
