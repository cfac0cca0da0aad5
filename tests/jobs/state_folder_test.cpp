// A run's state folder is its launcher's alone: two launches on one checkpoint.dir get two
// folders and one's clean-up leaves the other's; a folder whose launcher was killed before its
// clean-up is removed by the next launch on this host, one whose launcher runs is not.
#include "trainer/jobs/state_folder.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "trainer/common/host_name.h"
#include "trainer/common/temp_dir.h"

namespace tandem::jobs {
namespace {

namespace fs = std::filesystem;

// The pid of a child that has exited and been reaped: no process has it now.
pid_t gone_pid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

TEST(StateFolder, TwoLaunchesOnOneDirectoryGetTheirOwnAndOneEndingLeavesTheOther) {
  const TempDir dir("state-folder");
  const std::string prefix = dir.file("run/.rank-state");
  auto ending = std::make_unique<StateFolder>(prefix);
  const StateFolder starting(prefix);
  EXPECT_NE(ending->path(), starting.path());
  EXPECT_EQ(ending->path().rfind(prefix + "-" + host_name() + "-" + std::to_string(getpid()) + "-",
                                 0),
            0u)
      << ending->path();
  std::ofstream(starting.path() + "/rank-0.json") << "{}";
  const std::string ended = ending->path();
  ending.reset();
  EXPECT_FALSE(fs::exists(ended));
  EXPECT_TRUE(fs::exists(starting.path() + "/rank-0.json"));
}

TEST(StateFolder, AFolderOfAKilledLauncherIsRemovedAndOneOfALiveLauncherIsKept) {
  const TempDir dir("state-folder");
  const std::string prefix = dir.file(".rank-state");
  const std::string stem = prefix + "-" + host_name() + "-";
  const std::string killed = stem + std::to_string(gone_pid()) + "-abc123";
  const std::string live = stem + std::to_string(getppid()) + "-abc123";
  const std::string elsewhere = prefix + "-another-host-" + std::to_string(gone_pid()) + "-abc123";
  for (const auto& folder : {killed, live, elsewhere}) fs::create_directories(folder);
  const StateFolder mine(prefix);
  EXPECT_FALSE(fs::exists(killed));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(elsewhere)) << "another host's launcher cannot be checked from here";
  EXPECT_TRUE(fs::exists(mine.path()));
}

TEST(StateFolder, AFolderThatCannotBeMadeIsAnErrorNamingIt) {
  try {
    const StateFolder folder("/proc/tandem/.rank-state");
    FAIL() << folder.path();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create a folder like '/proc/tandem/.rank-state-"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tandem::jobs
