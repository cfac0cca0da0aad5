// Logging: rank-aware lines on stderr. Rank 0 speaks by default; per-rank lines carry "[rank N]".
#pragma once

#include <string>

namespace tandem::log {

// Set once at start-up by the process group; 0 for single-process tools.
void set_rank(int rank, int world_size);
int rank();

// Rank 0 only: "[tandem] message".
void info(const std::string& message);
// Every rank: "[tandem][rank N] warning: message".
void warn(const std::string& message);
// Every rank: "[tandem][rank N] error: message".
void error(const std::string& message);

}  // namespace tandem::log
