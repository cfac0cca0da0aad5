// Files written whole or not at all: a reader finds the old file or the new one, an unfinished
// writer leaves nothing, and a failure names the file and the OS's reason.
#include "trainer/common/atomic_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

TEST(AtomicFile, ACommittedFileReplacesTheOldOneWhole) {
  const TempDir dir("atomic");
  const std::string path = dir.file("out.txt");
  write_file_atomically(path, "old\n");
  AtomicFile file(path);
  file.append("new ");
  file.append("lines\n");
  EXPECT_EQ(read_file(path), "old\n");  // not yet published
  EXPECT_TRUE(fs::exists(path + ".tmp"));
  file.commit();
  EXPECT_EQ(read_file(path), "new lines\n");
  EXPECT_FALSE(fs::exists(path + ".tmp"));
}

TEST(AtomicFile, AWriterDroppedBeforeCommitLeavesTheOldFileAndNoTemporary) {
  const TempDir dir("atomic");
  const std::string path = dir.file("out.txt");
  write_file_atomically(path, "old\n");
  const std::string tmp = dir.file("assembling");
  {
    AtomicFile file(path, tmp);  // a temporary named by the caller
    file.append("half a");
    EXPECT_TRUE(fs::exists(tmp));
  }
  EXPECT_EQ(read_file(path), "old\n");
  EXPECT_FALSE(fs::exists(tmp));
}

TEST(AtomicFile, AFailureNamesTheFileAndTheReason) {
  const TempDir dir("atomic");
  const std::string missing = dir.file("no/such/folder/out.txt");
  try {
    write_file_atomically(missing, "x");
    FAIL() << "wrote into a folder that does not exist";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "cannot create '" + missing + ".tmp' (No such file or directory)");
  }
  EXPECT_THROW(read_file(missing), std::runtime_error);
  // A temporary that cannot be renamed into place (the path is a folder) is removed.
  const std::string folder = dir.file("a-folder");
  fs::create_directories(folder + "/inside");
  EXPECT_THROW(write_file_atomically(folder, "x"), std::runtime_error);
  EXPECT_FALSE(fs::exists(folder + ".tmp"));
  EXPECT_TRUE(fs::is_directory(folder));
}

TEST(AtomicFile, PublishFileMovesAnotherWritersFileIntoPlace) {
  const TempDir dir("atomic");
  const std::string tmp = dir.file("made.tmp"), path = dir.file("made");
  write_file_atomically(tmp, "bytes");  // as HDF5 would leave it: written and closed
  publish_file(tmp, path);
  EXPECT_EQ(read_file(path), "bytes");
  EXPECT_FALSE(fs::exists(tmp));
  EXPECT_THROW(publish_file(dir.file("never-written"), path), std::runtime_error);
  EXPECT_EQ(read_file(path), "bytes");
}

}  // namespace
}  // namespace tandem
