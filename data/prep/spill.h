// Spill files: arrays larger than memory on their way into a corpus file. tandem-prep appends each
// split's tokens and offsets to anonymous temporary files beside the output, then copies them
// into their datasets a block at a time.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/corpus/corpus_format.h"
#include "trainer/common/error.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::data {

// Elements copied from a spill per HDF5 write (16 compressed chunks).
inline constexpr size_t kSpillBlock = size_t{1} << 20;

// Values of type T appended to an anonymous temporary file beside the output (the name is
// unlinked at once, so nothing is left behind even by a crash), then copied into a dataset a block
// at a time: arrays larger than memory on their way into the corpus file.
template <class T>
class Spill {
 public:
  explicit Spill(const std::string& beside) : what_("temporary file beside '" + beside + "'") {
    std::string name = beside + ".spill-XXXXXX";
    const int fd = mkstemp(name.data());
    if (fd < 0) throw_cannot_open("output", name);
    ::unlink(name.c_str());
    file_ = fdopen(fd, "w+b");
    if (file_ == nullptr) {
      ::close(fd);
      fail("open");
    }
  }
  Spill(const Spill&) = delete;
  Spill& operator=(const Spill&) = delete;
  ~Spill() { std::fclose(file_); }

  void append(const T* values, size_t count) {
    if (count > 0 && std::fwrite(values, sizeof(T), count, file_) != count) fail("write");
    count_ += count;
  }
  uint64_t count() const { return count_; }

  // Writes everything appended to `dataset` (count() elements of mem_type, which is T).
  void copy_to(hid_t dataset, hid_t mem_type) {
    if (std::fflush(file_) != 0 || std::fseek(file_, 0, SEEK_SET) != 0) fail("rewind");
    std::vector<T> block(kSpillBlock);
    for (uint64_t begin = 0; begin < count_; begin += block.size()) {
      const size_t count = std::min<uint64_t>(block.size(), count_ - begin);
      if (std::fread(block.data(), sizeof(T), count, file_) != count) fail("read");
      h5::write_range(dataset, mem_type, begin, count, block.data());
    }
  }

 private:
  [[noreturn]] void fail(const char* action) const {
    const int err = errno;
    throw std::runtime_error("cannot " + std::string(action) + " the " + what_ + " (" +
                             (err != 0 ? std::strerror(err) : "unknown reason") + ")");
  }

  std::string what_;
  std::FILE* file_ = nullptr;
  uint64_t count_ = 0;
};

// One side of a split on its way to /<split>/<side>/{tokens,offsets}.
class SpilledSide {
 public:
  explicit SpilledSide(const std::string& beside) : tokens_(beside), offsets_(beside) {
    offsets_.append(&end_, 1);
  }
  // Appends sentences: their tokens back to back, and each one's length.
  void append(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths);
  // Appends `count` sentences without values (the pairs before a split's first alignments).
  void append_empty(int64_t count);
  int64_t tokens() const { return end_; }
  int64_t sentences() const { return static_cast<int64_t>(offsets_.count()) - 1; }

  // Writes the group `side` of `split_group`: its values (the dataset `values`: tokens, or an
  // alignment's links) and offsets datasets.
  void write(hid_t split_group, const std::string& side,
             const char* values = corpus_format::kTokens);

 private:
  Spill<int32_t> tokens_;
  Spill<int64_t> offsets_;
  int64_t end_ = 0;
};

}  // namespace tandem::data
