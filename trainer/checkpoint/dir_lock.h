// One job at a time in a checkpoint directory: rank 0 holds an flock on <dir>/tandem.lock, whose
// text names the holder (host, pid, start time).
#pragma once

#include <string>

namespace tandem::checkpoint {

// One job at a time in a checkpoint directory. The job's rank 0 holds an exclusive lock (flock) on
// <dir>/tandem.lock for as long as it runs, and the file says whose it is: host, pid, start time.
// A second job is refused with those; a lock file left by a job that died on this host (the kernel
// released its flock) is taken over with a message. A file naming another host is refused: this
// host cannot tell whether that job still runs.

constexpr const char* kLockFileName = "tandem.lock";

struct Holder;  // dir_lock.cpp: who holds a lock, as its file says

class DirLock {
 public:
  // Creates `dir` if needed and locks it. Throws std::invalid_argument naming the holder when
  // another job has it, std::runtime_error when the file cannot be created or locked.
  explicit DirLock(const std::string& dir);
  ~DirLock();  // removes the file and releases the lock
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;

  const std::string& path() const { return path_; }

 private:
  // Opens and locks the file; false when it was replaced meanwhile (try again). Throws as above.
  bool lock_file(const std::string& dir, Holder& previous);

  std::string path_;
  int fd_ = -1;
};

}  // namespace tandem::checkpoint
