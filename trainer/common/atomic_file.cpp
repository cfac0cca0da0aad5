#include "trainer/common/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace tandem {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int error) {
  throw std::runtime_error("cannot " + what + " '" + path + "' (" + std::strerror(error) + ")");
}

// Writes all of `bytes` to `fd` and syncs it; the errno of a failure, or 0.
int write_and_sync(int fd, const std::string& bytes) {
  for (size_t done = 0; done < bytes.size();) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<size_t>(n);
  }
  return fsync(fd) == 0 ? 0 : errno;
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("create", tmp, errno);
  const int error = write_and_sync(fd, bytes);
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (error != 0 || closed != 0) {
    std::remove(tmp.c_str());
    fail("write", tmp, error != 0 ? error : closed);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int renamed = errno;
    std::remove(tmp.c_str());
    fail("rename into", path, renamed);
  }
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
