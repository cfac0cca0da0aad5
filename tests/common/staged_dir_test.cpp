#include "trainer/common/staged_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem {
namespace {

namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// How many entries `dir` holds: a staging folder left behind shows up here.
int entries(const std::string& dir) {
  int count = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++count;
  return count;
}

TEST(StagedDir, CommitPublishesTheFolderWithItsFiles) {
  TempDir parent("staged");
  const std::string out = parent.file("model");
  {
    StagedDir staged(out, /*replace=*/false);
    write_file(staged.file("a.txt"), "written");
    EXPECT_FALSE(fs::exists(out)) << "published before commit()";
    staged.commit();
  }
  EXPECT_EQ(read_file(out + "/a.txt"), "written");
  EXPECT_EQ(entries(parent.path()), 1);  // the folder alone: no staging folder left
}

TEST(StagedDir, WithoutCommitNothingIsLeftBehind) {
  TempDir parent("staged");
  try {
    StagedDir staged(parent.file("model"), false);
    write_file(staged.file("half.bin"), "half");
    throw std::runtime_error("the export failed half way");
  } catch (const std::runtime_error&) {
  }
  EXPECT_EQ(entries(parent.path()), 0);
}

TEST(StagedDir, ReplaceSwapsTheOldFolderForTheNewOne) {
  TempDir parent("staged");
  const std::string out = parent.file("model");
  fs::create_directory(out);
  write_file(out + "/old.txt", "old");
  StagedDir staged(out + "/", /*replace=*/true);  // a trailing slash names the same folder
  write_file(staged.file("new.txt"), "new");
  EXPECT_EQ(read_file(out + "/old.txt"), "old") << "replaced before commit()";
  staged.commit();
  EXPECT_FALSE(fs::exists(out + "/old.txt"));
  EXPECT_EQ(read_file(out + "/new.txt"), "new");
  EXPECT_EQ(entries(parent.path()), 1);
}

TEST(StagedDir, WithoutReplaceAFolderThatAppearedMeanwhileIsKept) {
  TempDir parent("staged");
  const std::string out = parent.file("model");
  StagedDir staged(out, /*replace=*/false);
  write_file(staged.file("new.txt"), "new");
  fs::create_directory(out);
  write_file(out + "/theirs.txt", "theirs");
  EXPECT_THROW(staged.commit(), std::runtime_error);
  EXPECT_EQ(read_file(out + "/theirs.txt"), "theirs");
}

TEST(StagedDir, AMissingOrUnusableParentIsBadInputNamingThePath) {
  TempDir parent("staged");
  const std::string missing = parent.file("no/such/model");
  try {
    StagedDir staged(missing, false);
    FAIL() << "created under a missing folder";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
  write_file(parent.file("plain.txt"), "a file, not a folder");
  EXPECT_THROW(StagedDir(parent.file("plain.txt") + "/model", false), std::invalid_argument);
  EXPECT_EQ(entries(parent.path()), 1);
}

}  // namespace
}  // namespace tandem
