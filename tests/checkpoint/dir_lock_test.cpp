// One job per checkpoint directory: the lock names its holder, refuses a second holder, takes over
// a dead holder's file on this host, refuses a file from another host, and goes with its holder.
#include "trainer/checkpoint/dir_lock.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::checkpoint {
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
    DirLock second(dir);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "a second lock on " << dir << " was granted";
  return "";
}

TEST(DirLock, NamesItsHolderRefusesASecondAndGoesWithIt) {
  TempDir tmp("dir-lock");
  const std::string dir = tmp.file("run");  // created by the lock
  {
    DirLock lock(dir);
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
  DirLock again(dir);  // free once the holder is gone
}

TEST(DirLock, TakesOverTheFileOfAJobThatDiedOnThisHost) {
  TempDir tmp("dir-lock");
  // What a killed job leaves: the file, naming it, with no lock held on it.
  std::ofstream(tmp.file(kLockFileName))
      << "host " << this_host() << " pid 999999 started 2026-01-01T00:00:00Z\n";
  DirLock lock(tmp.path());
  EXPECT_EQ(read_file(lock.path()).find("pid 999999"), std::string::npos);
}

TEST(DirLock, RefusesAFileFromAnotherHostItCannotCheck) {
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

}  // namespace
}  // namespace tandem::checkpoint
