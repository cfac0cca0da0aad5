// Files written whole or not at all: the bytes go to a temporary file (<path>.tmp unless named),
// are synced, and the file is renamed into place with its folder synced after, so a reader (or a
// resumed job) finds the old file or the new one, never a part of one, even after a power loss.
// Every file Tandem writes whole goes through here: records, parts, outputs; a checkpoint's HDF5
// file is written by HDF5 and published with publish_file.
#pragma once

#include <string>

namespace tandem {

// A file being written, published by commit(); destroyed without commit(), it leaves nothing.
// Each step throws std::runtime_error naming the file and the OS error ("cannot write
// 'out.tmp' (No space left on device)"); nothing at `path` changes then.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path, std::string tmp = "");
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  // Appends `bytes` to the file.
  void append(const std::string& bytes);
  // Syncs and closes the file and renames it to its path.
  void commit();

 private:
  std::string path_, tmp_;
  int fd_ = -1;
};

// A whole file of `bytes` at `path`, as AtomicFile writes it.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Publishes `tmp`, written and closed by another writer, as `path`: synced, renamed, the folder
// synced. std::runtime_error naming the file and the OS error; `tmp` is left for the caller then.
void publish_file(const std::string& tmp, const std::string& path);

// The whole of the file at `path`; std::runtime_error naming it when it cannot be read.
std::string read_file(const std::string& path);

}  // namespace tandem
