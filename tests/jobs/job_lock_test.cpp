// One job at a time on what a job writes: the lock names its holder, refuses a second holder,
// takes over a dead holder's file on this host, refuses a file from another host, and goes with
// its holder; a file job's output is locked beside it, named as --output.
#include "trainer/jobs/job_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::jobs {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string this_host() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  return name;
}

// The message of the std::invalid_argument that locking `dir` throws, or a failure.
std::string refusal(const std::string& dir) {
  try {
    JobLock second(checkpoint_dir_target(dir));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "a second lock on " << dir << " was granted";
  return "";
}

TEST(JobLock, NamesItsHolderRefusesASecondAndGoesWithIt) {
  TempDir tmp("dir-lock");
  const std::string dir = tmp.file("run");  // created by the lock
  {
    JobLock lock(checkpoint_dir_target(dir));
    const std::string holder = read_file(lock.path());
    EXPECT_EQ(
        holder.rfind("host " + this_host() + " pid " + std::to_string(getpid()) + " started 20", 0),
        0u)
        << holder;
    const std::string message = refusal(dir);
    EXPECT_NE(message.find("checkpoint.dir '" + dir + "' is in use by another job (host " +
                           this_host() + ", pid " + std::to_string(getpid()) + ", started "),
              std::string::npos)
        << message;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/" + kLockFileName));
  JobLock again(checkpoint_dir_target(dir));  // free once the holder is gone
}

TEST(JobLock, TakesOverTheFileOfAJobThatDiedOnThisHost) {
  TempDir tmp("dir-lock");
  // What a killed job leaves: the file, naming it, with no lock held on it.
  std::ofstream(tmp.file(kLockFileName))
      << "host " << this_host() << " pid 999999 started 2026-01-01T00:00:00Z\n";
  JobLock lock(checkpoint_dir_target(tmp.path()));
  EXPECT_EQ(read_file(lock.path()).find("pid 999999"), std::string::npos);
}

TEST(JobLock, RefusesAFileFromAnotherHostItCannotCheck) {
  TempDir tmp("dir-lock");
  std::ofstream(tmp.file(kLockFileName)) << "host elsewhere-node17 pid 42 started "
                                            "2026-01-01T00:00:00Z\n";
  const std::string message = refusal(tmp.path());
  EXPECT_NE(message.find("was locked by a job on another host (host elsewhere-node17, pid 42, "
                         "started 2026-01-01T00:00:00Z)"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("delete '" + tmp.file(kLockFileName) + "'"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(tmp.file(kLockFileName)));  // left for the user to judge
}

TEST(JobLock, AFileJobsOutputIsLockedBesideItAndNamedAsTheOption) {
  TempDir tmp("dir-lock");
  const std::string output = tmp.file("out/bt.en");
  const LockTarget target = output_target(output);
  EXPECT_EQ(target.lock_file, tmp.file("out/.bt.en.lock"));
  JobLock lock(target);
  EXPECT_TRUE(std::filesystem::exists(tmp.file("out/.bt.en.lock")));
  try {
    JobLock second(target);
    ADD_FAILURE() << "a second lock on " << output << " was granted";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_EQ(message.rfind("--output '" + output + "' is in use by another job (host " +
                                this_host() + ", pid " + std::to_string(getpid()),
                            0),
              0u)
        << message;
    EXPECT_NE(message.find("; wait for it to end or give another --output"), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace tandem::jobs
