// The messages of a chunked job between rank 0 and the other ranks, as bytes: a chunk handed out
// (its index, first line and lines) and a result handed back (the chunk's index, its output, and
// whether the rank was asked to stop). Lines are bytes: any text, valid UTF-8 or not.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/bulk/chunk.h"

namespace tandem::bulk {

// The message tags.
enum ChunkTag : int {
  kReady = 1,   // worker → rank 0: models loaded, a chunk please
  kWork = 2,    // rank 0 → worker: a chunk
  kResult = 3,  // worker → rank 0: a chunk's output (and a chunk please)
  kFinish = 4,  // rank 0 → worker: nothing more; end
};

struct ChunkResult {
  int64_t index = 0;
  std::string text;
  int stop_signal = 0;  // the stop signal the worker got (no chunk after this one); 0: none
};

std::string encode_chunk(const Chunk& chunk);
Chunk decode_chunk(const std::string& bytes);
std::string encode_result(const ChunkResult& result);
ChunkResult decode_result(const std::string& bytes);

}  // namespace tandem::bulk
