// Reading raw text for tandem-prep: one side of a split as the lines of several files in order,
// each plain or gzip-compressed (told apart by content, not by name), with the position of every
// line (file and line number) for messages and a CRC-32 of the text read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tandem::data {

// CRC-32 as zlib, gzip and Python's zlib.crc32 compute it (reflected polynomial 0xEDB88320), so
// a user can check a recorded input against their text.
class Crc32 {
 public:
  void update(const char* data, size_t size);
  uint32_t value() const { return crc_ ^ 0xFFFFFFFFu; }

 private:
  uint32_t crc_ = 0xFFFFFFFFu;
};

class TextReader {
 public:
  // `role` names the input in messages ("train source"). Throws std::invalid_argument naming the
  // file when one cannot be opened (all are checked here, before any is read).
  TextReader(const std::vector<std::string>& paths, const std::string& role);
  TextReader(TextReader&&) noexcept;
  ~TextReader();

  // The next line without its newline (and without a trailing '\r'); false after the last line
  // of the last file. A file's last line needs no newline. Throws std::invalid_argument naming
  // the file and line when the data cannot be read (a damaged or truncated gzip stream).
  bool next(std::string& line);
  // Where line `index` (0-based over all files, one already returned) comes from:
  // "line 12 of 'train.de.gz'".
  std::string position_of(int64_t index) const;
  int64_t lines() const { return lines_; }  // lines returned so far, all files together
  // CRC-32 of the text read so far, newlines included, decompressed, files concatenated.
  uint32_t checksum() const { return crc_.value(); }

 private:
  bool fill();  // more bytes of the current file into buffer_; false at its end
  void open(size_t index);

  struct File;
  std::vector<std::string> paths_;
  std::string role_;
  size_t file_index_ = 0;
  std::unique_ptr<File> file_;
  std::vector<char> buffer_;
  size_t begin_ = 0, end_ = 0;  // unread bytes of buffer_
  int64_t lines_ = 0;
  int64_t file_line_ = 0;             // lines returned from the current file
  std::vector<int64_t> file_starts_;  // index of the first line of each file opened so far
  Crc32 crc_;
};

// "a.en" for one path, "a.en + b.en" for several: how messages and the corpus name a side.
std::string join_paths(const std::vector<std::string>& paths);

}  // namespace tandem::data
