// TensorBoard event files, as rank 0 and the launcher write them into a run's folder. A file is a
// TFRecord stream of Event messages (tensorboard_event.proto): each record is the message's
// length (8 bytes, little endian), the length's masked CRC32C, the message, and the message's
// masked CRC32C. Protobuf encodes the messages; ISA-L computes the CRC32C.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace tandem::train {

class EventFile {
 public:
  // Creates a new event file in `dir` (and `dir` if missing) and writes its version record. Its
  // name sorts after every event file already there, which is the order TensorBoard reads them
  // in. Throws std::invalid_argument naming `key` (the config key that chose `dir`) and `dir`
  // when the folder or the file cannot be made.
  EventFile(const std::string& dir, const std::string& key);
  ~EventFile();
  EventFile(const EventFile&) = delete;
  EventFile& operator=(const EventFile&) = delete;

  // A session that starts at `step`: TensorBoard drops the points at `step` and later that it
  // read before this event (an interrupted run's tail, which the resumed run writes again).
  void start_session(int64_t step);
  // One event at `step` holding these scalars, tag and value (TensorBoard keeps 32-bit floats).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values);
  // Markdown for TensorBoard's text dashboard.
  void text(int64_t step, const std::string& tag, const std::string& markdown);

  const std::string& path() const { return path_; }

 private:
  // Frames one serialized Event and flushes it; std::runtime_error naming the file when it fails.
  void write_record(const std::string& event);

  std::string path_;
  std::FILE* file_ = nullptr;
};

// CRC32C (Castagnoli) of `size` bytes, masked as TFRecord stores it: rotated right by 15 bits,
// plus 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t size);

// Creates `dir` if missing and checks that a file can be created in it: the check a run makes
// before training starts. Throws std::invalid_argument naming `key` and `dir` otherwise.
void require_writable_folder(const std::string& dir, const std::string& key);

}  // namespace tandem::train
