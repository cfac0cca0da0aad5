#include "trainer/checkpoint/atomic_write.h"


#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "trainer/common/atomic_file.h"

namespace tandem::checkpoint {
namespace {

using h5::Handle;

void write_file(const std::string& path, const std::function<void(hid_t)>& write_contents) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  // The 1.8 object format: checksummed metadata and creation-ordered groups; h5dump >= 1.8 reads
  // it.
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "file access");
#if H5_VERSION_GE(1, 10, 7)
  // Shared file systems without lock support (some NFS, Lustre) must not fail the save.
  h5::check(H5Pset_file_locking(fapl.get(), true, true), "file access");
#endif
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  h5::check(file.get(), "cannot create the file");
  write_contents(file.get());
  h5::check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "cannot flush the file");
  h5::check(file.close(), "cannot close the file");
}

// Bytes the file's contents take before HDF5's overhead: what a save needs on disk, about.
double content_bytes(const CheckpointData& data) {
  double bytes =
      static_cast<double>(data.vocab.size() + data.config_yaml.size() + data.validation.size());
  const auto add = [&](const NamedTensors& tensors) {
    for (const auto& [name, t] : tensors)
      bytes += static_cast<double>(t.numel() * t.element_size());
  };
  add(data.model);
  add(data.ema);
  for (const auto& [group, tensors] : data.optimizer) add(tensors);
  for (const auto& state : data.rng) bytes += static_cast<double>(state.size());
  return bytes;
}

// Bytes free to this user where `path` is to be written; -1 when unknown.
double free_bytes(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::error_code ec;
  const auto space = std::filesystem::space(dir.empty() ? "." : dir, ec);
  return ec ? -1.0 : static_cast<double>(space.available);
}

// One line for a failed save: the OS error when HDF5 reports one (its message buries "errno = 28,
// error message = 'No space left on device'" in a long line of file offsets), and for a full
// disk what the file needs and what is free.
std::string save_failure(const std::string& path, const std::string& error,
                         const CheckpointData& data) {
  static const std::regex kErrno("errno = ([0-9]+)");
  std::smatch match;
  const bool os_error = std::regex_search(error, match, kErrno);
  const int code = os_error ? std::stoi(match[1].str()) : 0;
  std::string line =
      "checkpoint: cannot write '" + path + "': " +
      (os_error ? std::string(std::strerror(code)) + " (errno " + std::to_string(code) + ")"
                : error);
  if (code == ENOSPC || code == EDQUOT) {
    char sizes[160];
    std::snprintf(sizes, sizeof sizes, "; it needs about %.1f MB, %.1f MB are free there",
                  content_bytes(data) / 1e6, std::max(0.0, free_bytes(path)) / 1e6);
    line += sizes;
  }
  return line + "; earlier checkpoints are untouched";
}

// A save that cannot fit fails before the file is begun, as the OS would report it.
void check_space(const std::string& path, const CheckpointData& data) {
  constexpr double kOverhead = 1.05, kMetadataBytes = 64 << 10;  // chunk indexes, checksums, groups
  const double available = free_bytes(path);
  if (available >= 0 && available < content_bytes(data) * kOverhead + kMetadataBytes) {
    throw std::runtime_error("errno = " + std::to_string(ENOSPC) + " (checked before writing)");
  }
}

}  // namespace

void write_atomically(const std::string& path, const CheckpointData& data,
                      const std::function<void(hid_t file)>& write_contents) {
  h5::QuietErrors quiet;
  const std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());  // a stale one from a crashed save
  try {
    check_space(tmp, data);
    write_file(tmp, write_contents);
    publish_file(tmp, path);  // data on disk before the name points at it
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw std::runtime_error(save_failure(path, e.what(), data));
  }
}

}  // namespace tandem::checkpoint
