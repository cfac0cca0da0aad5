#include "trainer/jobs/job_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "trainer/common/host_name.h"
#include "trainer/common/log.h"
#include "trainer/common/timestamp.h"

namespace tandem::jobs {

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

[[noreturn]] void fail(const LockTarget& target, const std::string& what) {
  throw std::runtime_error(target.option + ": cannot " + what + " '" + target.lock_file +
                           "': " + std::strerror(errno));
}

}  // namespace

LockTarget checkpoint_dir_target(const std::string& dir) {
  return {(std::filesystem::path(dir) / kLockFileName).string(), "checkpoint.dir '" + dir + "'",
          "checkpoint.dir"};
}

LockTarget output_target(const std::string& output) {
  const std::filesystem::path path(output);
  return {(path.parent_path() / ("." + path.filename().string() + ".lock")).string(),
          "--output '" + output + "'", "--output"};
}

JobLock::JobLock(const LockTarget& target) : target_(target) {
  const auto folder = std::filesystem::path(target_.lock_file).parent_path();
  if (!folder.empty()) std::filesystem::create_directories(folder);
  Holder previous;
  while (!lock_file(previous)) {
    // The holder removed the file between our open and our lock: lock the new one.
  }
  const Holder holder{host_name(), std::to_string(getpid()), utc_now_iso8601()};
  if (!previous.host.empty() && previous.host != holder.host) {
    close(fd_);
    throw std::invalid_argument(target_.name + " was locked by a job on another host (" +
                                previous.text() + "), which cannot be checked from here; if " +
                                "that job has ended, delete '" + target_.lock_file + "'");
  }
  if (!previous.host.empty()) {
    log::info("taking over " + target_.lock_file + " from a job that ended without releasing it (" +
              previous.text() + ")");
  }
  const std::string line =
      "host " + holder.host + " pid " + holder.pid + " started " + holder.started + "\n";
  if (ftruncate(fd_, 0) != 0 || pwrite(fd_, line.data(), line.size(), 0) < 0) {
    close(fd_);
    fail(target_, "write the lock file");
  }
}

bool JobLock::lock_file(Holder& previous) {
  const std::string& path = target_.lock_file;
  fd_ = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail(target_, "create the lock file");
  previous = read_holder(fd_);
  if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    close(fd_);
    errno = error;
    if (error != EWOULDBLOCK) fail(target_, "lock");
    throw std::invalid_argument(target_.name + " is in use by another job (" + previous.text() +
                                "); wait for it to end or give another " + target_.option);
  }
  struct stat locked {
  }, named{};
  if (fstat(fd_, &locked) == 0 && stat(path.c_str(), &named) == 0 &&
      locked.st_ino == named.st_ino && locked.st_dev == named.st_dev) {
    previous = read_holder(fd_);  // as it is now that nobody else can write it
    return true;
  }
  close(fd_);
  return false;
}

void wait_until_free(const LockTarget& target) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(kFreeWaitS);
  for (;;) {
    try {
      const JobLock free_now(target);
      return;
    } catch (const std::invalid_argument& e) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error(std::string(e.what()) + ", still " + std::to_string(kFreeWaitS) +
                                 " s after the failed job ended; not restarting");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
}

JobLock::~JobLock() {
  unlink(target_.lock_file.c_str());
  close(fd_);
}

}  // namespace tandem::jobs
