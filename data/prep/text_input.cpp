// TextReader on zlib's gz* functions, which read gzip streams and pass other files through as
// they are; lines are cut from a large buffer rather than read one call each.
#include "data/prep/text_input.h"

#include <zlib.h>

#include <cstring>
#include <stdexcept>

#include "trainer/common/error.h"

namespace tandem::data {
namespace {

constexpr size_t kBufferBytes = size_t{1} << 20;
constexpr unsigned kZlibBufferBytes = 1u << 18;

}  // namespace

void Crc32::update(const char* data, size_t size) {
  // zlib's crc32 is the same function, computed several bytes at a time.
  uLong crc = crc_ ^ 0xFFFFFFFFu;
  while (size > 0) {
    const auto chunk = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, reinterpret_cast<const Bytef*>(data), chunk);
    data += chunk;
    size -= chunk;
  }
  crc_ = static_cast<uint32_t>(crc) ^ 0xFFFFFFFFu;
}

struct TextReader::File {
  gzFile handle = nullptr;
  ~File() {
    if (handle != nullptr) gzclose(handle);
  }
};

TextReader::TextReader(const std::vector<std::string>& paths, const std::string& role)
    : paths_(paths), role_(role), buffer_(kBufferBytes) {
  if (paths_.empty()) throw std::invalid_argument(role_ + ": no input file given");
  for (const std::string& path : paths_) {  // every file now: a typo in the last one fails fast
    errno = 0;
    gzFile probe = gzopen(path.c_str(), "rb");
    if (probe == nullptr) throw_cannot_open(role_, path);
    gzclose(probe);
  }
  open(0);
}

TextReader::TextReader(TextReader&&) noexcept = default;
TextReader::~TextReader() = default;

void TextReader::open(size_t index) {
  file_index_ = index;
  file_line_ = 0;
  file_starts_.push_back(lines_);
  begin_ = end_ = 0;
  file_ = std::make_unique<File>();
  errno = 0;
  file_->handle = gzopen(paths_[index].c_str(), "rb");
  if (file_->handle == nullptr) throw_cannot_open(role_, paths_[index]);
  gzbuffer(file_->handle, kZlibBufferBytes);
}

bool TextReader::fill() {
  const int count = gzread(file_->handle, buffer_.data(), static_cast<unsigned>(buffer_.size()));
  int error = Z_OK;
  const char* message = gzerror(file_->handle, &error);
  // A truncated gzip stream reads as a short count with Z_BUF_ERROR, a corrupt one as -1.
  if (count < 0 || (error != Z_OK && error != Z_STREAM_END)) {
    throw std::invalid_argument(role_ + ": cannot read '" + paths_[file_index_] + "' after line " +
                                std::to_string(file_line_) + " (" +
                                (message != nullptr ? message : "read error") +
                                "; damaged or truncated file?)");
  }
  begin_ = 0;
  end_ = static_cast<size_t>(count);
  return count > 0;
}

bool TextReader::next(std::string& line) {
  line.clear();
  bool started = false;  // bytes of this line were read (a last line may lack its newline)
  while (true) {
    if (begin_ == end_ && !fill()) {
      if (started) break;
      if (file_index_ + 1 >= paths_.size()) return false;
      open(file_index_ + 1);
      continue;
    }
    const char* start = buffer_.data() + begin_;
    const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - begin_));
    const size_t length = newline != nullptr ? static_cast<size_t>(newline - start) : end_ - begin_;
    const size_t consumed = length + (newline != nullptr ? 1 : 0);
    line.append(start, length);
    crc_.update(start, consumed);
    begin_ += consumed;
    started = true;
    if (newline != nullptr) break;
  }
  ++lines_;
  ++file_line_;
  if (!line.empty() && line.back() == '\r') line.pop_back();  // CRLF files
  return true;
}

std::string TextReader::position_of(int64_t index) const {
  size_t file = file_starts_.size() - 1;
  while (file > 0 && file_starts_[file] > index) --file;
  return "line " + std::to_string(index - file_starts_[file] + 1) + " of '" + paths_[file] + "'";
}

std::string join_paths(const std::vector<std::string>& paths) {
  std::string joined;
  for (const std::string& path : paths) joined += (joined.empty() ? "" : " + ") + path;
  return joined;
}

}  // namespace tandem::data
