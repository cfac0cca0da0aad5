// What a job counts its progress in: training's steps, a file job's chunks. The ranks' state
// records (common/rank_state.h), the restart records (common/restart_record.h) and the launcher's
// lines (jobs/) say a job's place in its unit.
#pragma once

namespace tandem {

enum class JobUnit { kStep, kChunk };

// "step", "chunk".
inline const char* unit_name(JobUnit unit) { return unit == JobUnit::kChunk ? "chunk" : "step"; }

}  // namespace tandem
