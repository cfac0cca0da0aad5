#include "trainer/bulk/chunk_messages.h"

#include <cstring>
#include <stdexcept>

namespace tandem::bulk {
namespace {

template <typename T>
void put(std::string& out, T value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void put_text(std::string& out, const std::string& text) {
  put<uint64_t>(out, text.size());
  out += text;
}

// Reads what put wrote, in order; std::runtime_error past the end (a message cut short).
class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  template <typename T>
  T get() {
    T value;
    std::memcpy(&value, take(sizeof value), sizeof value);
    return value;
  }
  std::string text() {
    const auto size = get<uint64_t>();
    const char* at = take(size);
    return std::string(at, size);
  }

 private:
  const char* take(size_t size) {
    if (size > bytes_.size() - at_) throw std::runtime_error("a chunk message cut short");
    const char* here = bytes_.data() + at_;
    at_ += size;
    return here;
  }
  const std::string& bytes_;
  size_t at_ = 0;
};

}  // namespace

std::string encode_chunk(const Chunk& chunk) {
  std::string out;
  put(out, chunk.index);
  put(out, chunk.first_line);
  put<uint64_t>(out, chunk.columns.size());
  for (const auto& column : chunk.columns) {
    put<uint64_t>(out, column.size());
    for (const auto& line : column) put_text(out, line);
  }
  return out;
}

Chunk decode_chunk(const std::string& bytes) {
  Reader in(bytes);
  Chunk chunk;
  chunk.index = in.get<int64_t>();
  chunk.first_line = in.get<int64_t>();
  chunk.columns.resize(in.get<uint64_t>());
  for (auto& column : chunk.columns) {
    column.resize(in.get<uint64_t>());
    for (auto& line : column) line = in.text();
  }
  return chunk;
}

std::string encode_result(const ChunkResult& result) {
  std::string out;
  put(out, result.index);
  put<int32_t>(out, result.stop_signal);
  put_text(out, result.text);
  return out;
}

ChunkResult decode_result(const std::string& bytes) {
  Reader in(bytes);
  ChunkResult result;
  result.index = in.get<int64_t>();
  result.stop_signal = in.get<int32_t>();
  result.text = in.text();
  return result;
}

}  // namespace tandem::bulk
