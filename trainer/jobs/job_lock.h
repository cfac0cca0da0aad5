// One job at a time on what a job writes (a checkpoint.dir, a file job's output): the job's rank 0
// holds an flock on a lock file whose text names the holder (host, pid, start time).
#pragma once

#include <string>

namespace tandem::jobs {

// What a job writes, as its lock and messages name it.
struct LockTarget {
  std::string lock_file;  // the file locked
  std::string name;       // "checkpoint.dir 'runs/a'", "--output 'bt.en'"
  std::string option;     // the setting that names it: "checkpoint.dir", "--output"
};

constexpr const char* kLockFileName = "tandem.lock";

// <dir>/tandem.lock.
LockTarget checkpoint_dir_target(const std::string& dir);
// .<name>.lock beside the output.
LockTarget output_target(const std::string& output);

struct Holder;  // job_lock.cpp: who holds a lock, as its file says

// The job's rank 0 holds an exclusive lock (flock) on target.lock_file for as long as it runs,
// and the file says whose it is: host, pid, start time. A second job is refused with those; a
// lock file left by a job that died on this host (the kernel released its flock) is taken over
// with a message. A file naming another host is refused: this host cannot tell whether that job
// still runs.
class JobLock {
 public:
  // Creates the lock file's folder if needed and locks the file. Throws std::invalid_argument
  // naming the target and the holder when another job has it, std::runtime_error when the file
  // cannot be created or locked.
  explicit JobLock(const LockTarget& target);
  ~JobLock();  // removes the file and releases the lock
  JobLock(const JobLock&) = delete;
  JobLock& operator=(const JobLock&) = delete;

  const std::string& path() const { return target_.lock_file; }

 private:
  // Opens and locks the file; false when it was replaced meanwhile (try again). Throws as above.
  bool lock_file(Holder& previous);

  LockTarget target_;
  int fd_ = -1;
};

// Waits, polling, until no job holds `target`: a failed job's rank 0 lets go when the kernel has
// reaped it, which can take a moment after mpirun has exited. std::runtime_error naming the
// holder when it still holds it kFreeWaitS seconds on (a relaunch then does not start).
constexpr int kFreeWaitS = 60;
void wait_until_free(const LockTarget& target);

}  // namespace tandem::jobs
