// TensorBoard event files as written: every record's framing and checksums against a bitwise
// CRC32C written here, file names that sort after the folder's newest, the folder check's error,
// and the tags the metrics records' numbers get.
#include "trainer/tensorboard/event_file.h"

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "trainer/common/temp_dir.h"
#include "trainer/train/metrics_log.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;

// CRC32C one bit at a time (reflected polynomial 0x82f63b78), masked as TFRecord does.
uint32_t naive_masked_crc32c(const std::string& bytes) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

uint64_t little_endian(const std::string& bytes, size_t at, int size) {
  uint64_t value = 0;
  for (int i = size - 1; i >= 0; --i) {
    value = (value << 8) | static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)]);
  }
  return value;
}

// The records of an event file, each checked against its length and data checksums.
std::vector<std::string> records_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> records;
  size_t at = 0;
  while (at < bytes.size()) {
    EXPECT_LE(at + 12, bytes.size());
    const uint64_t length = little_endian(bytes, at, 8);
    EXPECT_EQ(little_endian(bytes, at + 8, 4), naive_masked_crc32c(bytes.substr(at, 8)));
    const std::string data = bytes.substr(at + 12, length);
    EXPECT_EQ(little_endian(bytes, at + 12 + length, 4), naive_masked_crc32c(data));
    records.push_back(data);
    at += 12 + length + 4;
  }
  EXPECT_EQ(at, bytes.size());
  return records;
}

TEST(EventFile, MaskedCrc32cEqualsABitwiseLoop) {
  // The unmasked check value of "123456789" is 0xe3069283 (CRC32C's catalogue entry).
  const uint32_t masked = masked_crc32c("123456789", 9);
  const uint32_t unmasked = masked - 0xa282ead8u;
  EXPECT_EQ((unmasked << 15) | (unmasked >> 17), 0xe3069283u);
  std::mt19937 rng(7);
  for (size_t size : {0, 1, 7, 8, 15, 16, 63, 64, 1000, 4099}) {
    std::string bytes(size, '\0');
    for (auto& c : bytes) c = static_cast<char>(rng());
    EXPECT_EQ(masked_crc32c(bytes.data(), bytes.size()), naive_masked_crc32c(bytes)) << size;
  }
}

TEST(EventFile, RecordsAreFramedAndTheNameSortsAfterTheNewestFile) {
  TempDir dir("event-file");
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  // Another writer's file, named 100 s ahead of this clock.
  const std::string ahead = std::to_string(now + 100);
  std::ofstream(dir.file("events.out.tfevents." + ahead + ".other.1")) << "";
  std::string path;
  {
    EventFile events(dir.file("board"), "log.tensorboard_dir");  // a folder it creates
    events.start_session(21);
    events.scalars(25, {{"train/loss", 2.5}, {"train/lr", 1e-3}});
    events.text(25, "valid/samples", "| a | b |");
    path = events.path();
  }
  EXPECT_EQ(fs::path(path).parent_path(), fs::path(dir.file("board")));
  EXPECT_EQ(records_of(path).size(), 4u);  // the version, the session start, scalars, text

  EventFile later(dir.path(), "log.tensorboard_dir");
  const std::string name = fs::path(later.path()).filename().string();
  EXPECT_EQ(name.substr(0, 30), "events.out.tfevents." + std::to_string(now + 101)) << name;
  EXPECT_GT(name, "events.out.tfevents." + ahead + ".other.1");
  EXPECT_EQ(records_of(later.path()).size(), 1u);
}

TEST(EventFile, AFolderThatCannotBeMadeNamesTheKeyAndTheFolder) {
  TempDir dir("event-file-bad");
  std::ofstream(dir.file("a-file")) << "x";
  const std::string folder = dir.file("a-file") + "/board";
  const std::vector<std::function<void()>> makers = {
      [&] { require_writable_folder(folder, "log.tensorboard_dir"); },
      [&] { EventFile events(folder, "log.tensorboard_dir"); }};
  for (const auto& make : makers) {
    try {
      make();
      FAIL() << "no error for " << folder;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(
                    "log.tensorboard_dir: cannot create the folder '" + folder + "' (", 0),
                0u)
          << e.what();
    }
  }
}

TEST(MetricsLog, ANumberIsTaggedByItsRecordsSection) {
  using Scalars = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(tensorboard_scalars({{"step", 50}, {"loss", 2.5}, {"lr", 0.001}, {"epoch", 1}}),
            (Scalars{{"train/epoch", 1}, {"train/loss", 2.5}, {"train/lr", 0.001}}));
  EXPECT_EQ(tensorboard_scalars({{"step", 50}, {"valid_bleu", 12.5}, {"best_step", 50}}),
            (Scalars{{"valid/best_step", 50}, {"valid/bleu", 12.5}}));
  EXPECT_EQ(tensorboard_scalars({{"step", 20},
                                 {"event", "restart"},
                                 {"restart", 1},
                                 {"failure", "rank 1 failed"},
                                 {"world_size", 2}}),
            (Scalars{{"restart/restart", 1}, {"restart/world_size", 2}}));
}

}  // namespace
}  // namespace tandem::train
