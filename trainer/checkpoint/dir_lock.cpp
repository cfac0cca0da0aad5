#include "trainer/checkpoint/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>

#include "trainer/common/host_name.h"
#include "trainer/common/log.h"
#include "trainer/common/timestamp.h"

namespace tandem::checkpoint {

// The file's one line: "host <name> pid <pid> started <time>".
struct Holder {
  std::string host, pid, started;
  std::string text() const {
    if (host.empty()) return "its lock file names no holder yet";
    return "host " + host + ", pid " + pid + ", started " + started;
  }
};

namespace {

Holder read_holder(int fd) {
  char buffer[512] = {};
  const ssize_t n = pread(fd, buffer, sizeof buffer - 1, 0);
  Holder holder;
  std::istringstream line(std::string(buffer, n > 0 ? static_cast<size_t>(n) : 0));
  std::string key;
  while (line >> key) {
    std::string* field = key == "host"      ? &holder.host
                         : key == "pid"     ? &holder.pid
                         : key == "started" ? &holder.started
                                            : nullptr;
    if (field == nullptr || !(line >> *field)) break;
  }
  return holder;
}

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("checkpoint.dir: cannot " + what + " '" + path +
                           "': " + std::strerror(errno));
}

}  // namespace

DirLock::DirLock(const std::string& dir)
    : path_((std::filesystem::path(dir) / kLockFileName).string()) {
  std::filesystem::create_directories(dir);
  Holder previous;
  while (!lock_file(dir, previous)) {
    // The holder removed the file between our open and our lock: lock the new one.
  }
  const Holder holder{host_name(), std::to_string(getpid()), utc_now_iso8601()};
  if (!previous.host.empty() && previous.host != holder.host) {
    close(fd_);
    throw std::invalid_argument("checkpoint.dir '" + dir + "' was locked by a job on another " +
                                "host (" + previous.text() + "), which cannot be checked from " +
                                "here; if that job has ended, delete '" + path_ + "'");
  }
  if (!previous.host.empty()) {
    log::info("taking over " + path_ + " from a job that ended without releasing it (" +
              previous.text() + ")");
  }
  const std::string line =
      "host " + holder.host + " pid " + holder.pid + " started " + holder.started + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, line.data(), line.size(), 0) < 0) {
    close(fd_);
    fail("write the lock file", path_);
  }
}

bool DirLock::lock_file(const std::string& dir, Holder& previous) {
  fd_ = open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("create the lock file", path_);
  previous = read_holder(fd_);
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    close(fd_);
    errno = error;
    if (error != EWOULDBLOCK) fail("lock", path_);
    throw std::invalid_argument("checkpoint.dir '" + dir + "' is in use by another job (" +
                                previous.text() + "); wait for it to end or give another " +
                                "checkpoint.dir");
  }
  struct stat locked {
  }, named{};
  if (fstat(fd_, &locked) == 0 && stat(path_.c_str(), &named) == 0 &&
      locked.st_ino == named.st_ino && locked.st_dev == named.st_dev) {
    previous = read_holder(fd_);  // as it is now that nobody else can write it
    return true;
  }
  close(fd_);
  return false;
}

DirLock::~DirLock() {
  unlink(path_.c_str());
  close(fd_);
}

}  // namespace tandem::checkpoint
