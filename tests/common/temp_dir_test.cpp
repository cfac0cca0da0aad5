#include "trainer/common/temp_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace tandem {
namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) { std::ofstream(path) << text; }

TEST(TempDir, ItsDestructorRemovesEverythingUnderIt) {
  std::string kept;
  {
    TempDir dir("tree");
    kept = dir.path();
    fs::create_directories(fs::path(dir.path()) / "a" / "b" / "c");
    write_file(dir.file("top.txt"), "1");
    write_file(fs::path(dir.path()) / "a" / "b" / "c" / "deep.txt", "2");
    ASSERT_TRUE(fs::exists(fs::path(dir.path()) / "a" / "b" / "c" / "deep.txt"));
  }
  EXPECT_FALSE(fs::exists(kept));
}

TEST(RemoveTree, RemovesLinksWithoutFollowingThem) {
  TempDir outside("outside"), doomed("doomed");
  write_file(outside.file("precious.txt"), "keep me");
  ASSERT_EQ(::symlink(outside.path().c_str(), doomed.file("link-to-dir").c_str()), 0);
  ASSERT_EQ(::symlink(outside.file("precious.txt").c_str(), doomed.file("link-to-file").c_str()),
            0);
  EXPECT_TRUE(remove_tree(doomed.path()));
  EXPECT_FALSE(fs::exists(fs::symlink_status(doomed.path())));
  EXPECT_TRUE(fs::exists(outside.file("precious.txt")));
}

TEST(RemoveTree, RemovesAFileAndAcceptsWhatIsAlreadyGone) {
  TempDir dir("file");
  write_file(dir.file("one.txt"), "x");
  EXPECT_TRUE(remove_tree(dir.file("one.txt")));
  EXPECT_FALSE(fs::exists(dir.file("one.txt")));
  EXPECT_TRUE(remove_tree(dir.file("never-was")));
  EXPECT_TRUE(fs::exists(dir.path()));
}

}  // namespace
}  // namespace tandem
