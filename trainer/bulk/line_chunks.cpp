#include "trainer/bulk/line_chunks.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "trainer/common/error.h"
#include "trainer/common/fnv_hash.h"

namespace tandem::bulk {
namespace {

constexpr size_t kBlockBytes = size_t{1} << 20;

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const std::string& path, const std::string& what) {
  struct stat info {};
  if (stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode)) {
    throw std::invalid_argument(what + " '" + path + "' is a folder, not a text file");
  }
  File file(std::fopen(path.c_str(), "rb"));
  if (!file) throw_cannot_open(what, path);
  return file;
}

// Walks the bytes of one block, cutting a chunk after every chunk_lines-th '\n'.
class Indexer {
 public:
  explicit Indexer(LineChunks& out) : out_(out) {}

  void add(const char* data, size_t size) {
    out_.hash = fnv1a(data, size, out_.hash);
    const char* end = data + size;
    for (const char* at = data; at < end;) {
      if (!open_) begin_chunk();
      const auto* newline = static_cast<const char*>(std::memchr(at, '\n', end - at));
      const char* stop = newline != nullptr ? newline + 1 : end;
      take(at, static_cast<size_t>(stop - at));
      at = stop;
      if (newline != nullptr && ++lines_in_chunk_ == out_.chunk_lines) end_chunk();
    }
  }

  void finish() {
    if (open_) {
      out_.lines += lines_in_chunk_ + (last_byte_ != '\n' ? 1 : 0);
      out_.chunks.back().bytes = offset_ - out_.chunks.back().start;
    }
    out_.bytes = offset_;
  }

 private:
  void begin_chunk() {
    out_.chunks.push_back({offset_, 0, kFnvOffsetBasis});
    open_ = true;
    lines_in_chunk_ = 0;
  }
  void take(const char* data, size_t size) {
    out_.chunks.back().hash = fnv1a(data, size, out_.chunks.back().hash);
    offset_ += size;
    last_byte_ = data[size - 1];
  }
  void end_chunk() {
    out_.chunks.back().bytes = offset_ - out_.chunks.back().start;
    out_.lines += lines_in_chunk_;
    open_ = false;
  }

  LineChunks& out_;
  uint64_t offset_ = 0;
  bool open_ = false;
  int64_t lines_in_chunk_ = 0;
  char last_byte_ = '\n';
};

}  // namespace

int64_t LineChunks::lines_in(int64_t chunk) const {
  const int64_t rest = lines - first_line(chunk);
  return rest < chunk_lines ? rest : chunk_lines;
}

LineChunks index_lines(const std::string& path, int64_t chunk_lines, const std::string& what) {
  if (chunk_lines < 1) {
    throw std::invalid_argument("chunks of " + std::to_string(chunk_lines) +
                                " lines: expected at least 1");
  }
  LineChunks out;
  out.path = path;
  out.chunk_lines = chunk_lines;
  out.hash = kFnvOffsetBasis;
  const File file = open_file(path, what);
  Indexer indexer(out);
  std::vector<char> block(kBlockBytes);
  for (;;) {
    const size_t got = std::fread(block.data(), 1, block.size(), file.get());
    if (got > 0) indexer.add(block.data(), got);
    if (got < block.size()) break;
  }
  if (std::ferror(file.get())) {
    throw std::invalid_argument(what + " '" + path + "': read error (" + std::strerror(errno) +
                                ")");
  }
  indexer.finish();
  return out;
}

std::vector<std::string> read_chunk(const LineChunks& file, int64_t chunk) {
  const LineChunks::Chunk& where = file.chunks.at(static_cast<size_t>(chunk));
  const auto changed = [&](const std::string& how) {
    return std::runtime_error("'" + file.path + "' changed while the job ran (" + how +
                              " in chunk " + std::to_string(chunk) +
                              "); the chunks done so far are kept: restore the file, or remove "
                              "the output's .parts folder to start afresh");
  };
  File in(std::fopen(file.path.c_str(), "rb"));
  if (!in) throw changed(std::string("cannot open it: ") + std::strerror(errno));
  std::string bytes(where.bytes, '\0');
  if (fseeko(in.get(), static_cast<off_t>(where.start), SEEK_SET) != 0 ||
      std::fread(bytes.data(), 1, bytes.size(), in.get()) != bytes.size()) {
    throw changed("fewer bytes");
  }
  if (fnv1a(bytes.data(), bytes.size()) != where.hash) throw changed("other bytes");
  std::vector<std::string> lines;
  lines.reserve(static_cast<size_t>(file.lines_in(chunk)));
  for (size_t at = 0; at < bytes.size();) {
    size_t end = bytes.find('\n', at);
    if (end == std::string::npos) end = bytes.size();
    size_t stop = end;
    if (stop > at && bytes[stop - 1] == '\r') --stop;
    lines.emplace_back(bytes, at, stop - at);
    at = end + 1;
  }
  return lines;
}

}  // namespace tandem::bulk
