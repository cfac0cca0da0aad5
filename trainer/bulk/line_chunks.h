// A text file's lines cut into chunks of a fixed number of lines, found in one streaming pass:
// where each chunk starts (a byte offset per chunk, not per line), how many lines there are, and
// hashes of the bytes, the whole file's and each chunk's. A chunk is then read alone, so the
// reader of a chunked job holds one chunk's lines whatever the file's size, and a file that
// changes under the job is caught at the chunk that changed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::bulk {

struct LineChunks {
  std::string path;
  int64_t chunk_lines = 1;  // lines per chunk; the last chunk may have fewer
  int64_t lines = 0;        // a last line without '\n' counts
  uint64_t bytes = 0;
  uint64_t hash = 0;  // FNV-1a 64 of the whole file
  struct Chunk {
    uint64_t start = 0;  // byte offset of its first line
    uint64_t bytes = 0;
    uint64_t hash = 0;  // FNV-1a 64 of its bytes
  };
  std::vector<Chunk> chunks;

  int64_t count() const { return static_cast<int64_t>(chunks.size()); }
  int64_t first_line(int64_t chunk) const { return chunk * chunk_lines; }
  int64_t lines_in(int64_t chunk) const;
};

// The chunks of the file at `path`. std::invalid_argument naming `what` (the flag that gave the
// file) and the path when it cannot be opened or read, or is a folder.
LineChunks index_lines(const std::string& path, int64_t chunk_lines, const std::string& what);

// The lines of chunk `chunk`, each without its '\n' and a '\r' before it (as tandem-decode reads
// standard input). std::runtime_error naming the file when its bytes there are no longer those
// index_lines saw (the file changed under the job).
std::vector<std::string> read_chunk(const LineChunks& file, int64_t chunk);

}  // namespace tandem::bulk
