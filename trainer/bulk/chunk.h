// A chunk of a file job: its place in the input and its lines, and what a rank does with it. What
// the job (chunk_job.h), the messages between ranks (chunk_messages.h) and rank 0's worker thread
// (local_worker.h) hand around.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tandem::bulk {

struct Chunk {
  int64_t index = 0;
  int64_t first_line = 0;                         // the index of its first line in the input
  std::vector<std::vector<std::string>> columns;  // per input file, the chunk's lines
};

// What a rank does with each chunk it is handed: its output text (lines ending in '\n').
using ChunkFunction = std::function<std::string(const Chunk&)>;

}  // namespace tandem::bulk
