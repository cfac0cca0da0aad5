#include "trainer/common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <utility>

namespace tandem {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw std::runtime_error("cannot " + what + " '" + path + "' (" + std::strerror(error) + ")");
}

// Syncs what `path` names (a file, or with O_DIRECTORY a folder); the errno of a failure, or 0.
int sync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags | O_CLOEXEC);
  if (fd < 0) return errno;
  const int error = ::fsync(fd) == 0 ? 0 : errno;
  ::close(fd);
  return error;
}

// The folder a rename into `path` changes, synced so that the new name survives a power loss.
// Some file systems cannot sync a folder (EINVAL): the rename stands there as the OS keeps it.
void sync_folder_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int error = sync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
  if (error != 0 && error != EINVAL) fail("sync the folder of", path, error);
}

void rename_into(const std::string& tmp, const std::string& path) {
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail("rename into", path, errno);
  sync_folder_of(path);
}

}  // namespace

AtomicFile::AtomicFile(std::string path, std::string tmp)
    : path_(std::move(path)), tmp_(tmp.empty() ? path_ + ".tmp" : std::move(tmp)) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create", tmp_, errno);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) std::remove(tmp_.c_str());
}

void AtomicFile::append(const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write", tmp_, errno);
    done += static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  const int synced = ::fsync(fd_) == 0 ? 0 : errno;
  const int closed = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  if (synced != 0 || closed != 0) fail("write", tmp_, synced != 0 ? synced : closed);
  rename_into(tmp_, path_);
  tmp_.clear();  // published: nothing to remove
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  AtomicFile file(path);
  file.append(bytes);
  file.commit();
}

void publish_file(const std::string& tmp, const std::string& path) {
  if (const int error = sync_path(tmp, O_RDONLY); error != 0) fail("sync", tmp, error);
  rename_into(tmp, path);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("open", path, errno);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) fail("read", path, errno);
  return bytes.str();
}

}  // namespace tandem
