#include "trainer/tensorboard/event_file.h"

#include <isa-l/crc.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "trainer/common/host_name.h"
#include "trainer/tensorboard/tensorboard_event.pb.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;
namespace pb = tandem::tensorboard;

constexpr const char* kPrefix = "events.out.tfevents.";

double wall_time() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string reason(int err) { return err != 0 ? std::strerror(err) : "unknown reason"; }

void create_folder(const std::string& dir, const std::string& key) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error || !fs::is_directory(dir)) {
    throw std::invalid_argument(key + ": cannot create the folder '" + dir + "' (" +
                                (error ? error.message() : "a file has that name") + ")");
  }
}

// The seconds field of the newest event file name in `dir` (TensorBoard's and PyTorch's writers
// name theirs the same way), or -1.
int64_t newest_file_seconds(const std::string& dir) {
  int64_t newest = -1;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const std::string rest = name.substr(std::strlen(kPrefix));
    const std::string digits = rest.substr(0, rest.find('.'));
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    newest = std::max<int64_t>(newest, std::stoll(digits));
  }
  return newest;
}

// An event at `step`, stamped now.
pb::Event event_at(int64_t step) {
  pb::Event event;
  event.set_wall_time(wall_time());
  event.set_step(step);
  return event;
}

std::string serialized(const pb::Event& event) {
  std::string bytes;
  event.SerializeToString(&bytes);
  return bytes;
}

}  // namespace

uint32_t masked_crc32c(const void* data, size_t size) {
  // ISA-L's iSCSI CRC is CRC32C without the initial and final inversions.
  const uint32_t crc = crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)),
                                   static_cast<int>(size), 0xffffffffu) ^
                       0xffffffffu;
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

void require_writable_folder(const std::string& dir, const std::string& key) {
  create_folder(dir, key);
  std::string probe = (fs::path(dir) / ".tandem-write-test.XXXXXX").string();
  const int fd = mkstemp(probe.data());
  if (fd < 0) {
    throw std::invalid_argument(key + ": cannot write in the folder '" + dir + "' (" +
                                reason(errno) + ")");
  }
  close(fd);
  std::remove(probe.c_str());
}

EventFile::EventFile(const std::string& dir, const std::string& key) {
  create_folder(dir, key);
  const std::string suffix = "." + host_name() + "." + std::to_string(getpid());
  int64_t seconds =
      std::max<int64_t>(static_cast<int64_t>(wall_time()), newest_file_seconds(dir) + 1);
  for (;; ++seconds) {
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "%010lld", static_cast<long long>(seconds));
    path_ = (fs::path(dir) / (kPrefix + std::string(stamp) + suffix)).string();
    file_ = std::fopen(path_.c_str(), "wbx");  // never another writer's file
    if (file_ != nullptr) break;
    if (errno != EEXIST) {
      throw std::invalid_argument(key + ": cannot create '" + path_ + "' (" + reason(errno) + ")");
    }
  }
  pb::Event event = event_at(0);
  event.set_file_version("brain.Event:2");  // the version whose session starts TensorBoard honours
  write_record(serialized(event));
}

EventFile::~EventFile() {
  if (file_ != nullptr) std::fclose(file_);
}

void EventFile::start_session(int64_t step) {
  pb::Event event = event_at(step);
  event.mutable_session_log()->set_status(pb::SessionLog::START);
  write_record(serialized(event));
}

void EventFile::scalars(int64_t step, const std::vector<std::pair<std::string, double>>& values) {
  pb::Event event = event_at(step);
  for (const auto& [tag, value] : values) {
    auto* v = event.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
  }
  write_record(serialized(event));
}

void EventFile::text(int64_t step, const std::string& tag, const std::string& markdown) {
  pb::Event event = event_at(step);
  auto* v = event.mutable_summary()->add_value();
  v->set_tag(tag);
  v->mutable_metadata()->mutable_plugin_data()->set_plugin_name("text");
  v->mutable_metadata()->set_data_class(pb::DATA_CLASS_TENSOR);
  v->mutable_tensor()->set_dtype(pb::DT_STRING);
  v->mutable_tensor()->mutable_tensor_shape();  // no dimensions: one string
  v->mutable_tensor()->add_string_val(markdown);
  write_record(serialized(event));
}

void EventFile::write_record(const std::string& event) {
  unsigned char length[8];
  const uint64_t size = event.size();
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(size >> (8 * i));
  const uint32_t length_crc = masked_crc32c(length, sizeof length);
  const uint32_t event_crc = masked_crc32c(event.data(), event.size());
  unsigned char crcs[2][4];
  for (int i = 0; i < 4; ++i) {
    crcs[0][i] = static_cast<unsigned char>(length_crc >> (8 * i));
    crcs[1][i] = static_cast<unsigned char>(event_crc >> (8 * i));
  }
  const bool written = std::fwrite(length, 1, 8, file_) == 8 &&
                       std::fwrite(crcs[0], 1, 4, file_) == 4 &&
                       std::fwrite(event.data(), 1, event.size(), file_) == event.size() &&
                       std::fwrite(crcs[1], 1, 4, file_) == 4 && std::fflush(file_) == 0;
  if (!written) {
    throw std::runtime_error("tensorboard: cannot write '" + path_ + "' (" + reason(errno) + ")");
  }
}

}  // namespace tandem::train
