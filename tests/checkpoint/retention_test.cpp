#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/temp_dir.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

class RetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_retention_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void save_step(int64_t step) {
    CheckpointData data;
    data.step = step;
    data.model = {{"w", torch::full({2}, static_cast<float>(step))}};
    save(path(step_file_name(step)), data);
  }
  void touch(const std::string& name) { std::ofstream(path(name)) << "x"; }
  std::set<std::string> names() const {
    std::set<std::string> found;
    for (const auto& entry : fs::directory_iterator(dir_)) found.insert(entry.path().filename());
    return found;
  }

  fs::path dir_;
};

TEST(StepFileName, IsZeroPaddedToEightDigits) {
  EXPECT_EQ(step_file_name(0), "step-00000000.h5");
  EXPECT_EQ(step_file_name(500), "step-00000500.h5");
  EXPECT_EQ(step_file_name(123456789), "step-123456789.h5");
  EXPECT_THROW(step_file_name(-1), std::invalid_argument);
}

TEST_F(RetentionTest, FindLatestPicksTheHighestStepThatOpens) {
  save_step(200);
  save_step(1000);
  save_step(999);
  touch("step-00005000.h5");  // not HDF5: e.g. a copy that never finished
  fs::copy_file(path(step_file_name(1000)), path(step_file_name(3000)));
  fs::resize_file(path(step_file_name(3000)), fs::file_size(path(step_file_name(3000))) / 2);
  fs::copy_file(path(step_file_name(1000)), path("step-00009000.h5.tmp"));
  fs::copy_file(path(step_file_name(1000)), path("last.h5"));
  fs::copy_file(path(step_file_name(1000)), path("step-9999.h5.bak"));
  EXPECT_EQ(find_latest(dir_.string()), path(step_file_name(1000)));
}

TEST_F(RetentionTest, StepFilesListsEveryStepFileNewestFirstWithoutOpeningThem) {
  for (int step : {200, 1000, 999}) touch(step_file_name(step));
  touch("last.h5");
  touch("step-00005000.h5.tmp");
  EXPECT_EQ(step_files(dir_.string()),
            (std::vector<std::string>{path("step-00001000.h5"), path("step-00000999.h5"),
                                      path("step-00000200.h5")}));
  EXPECT_TRUE(step_files(path("absent")).empty());
}

TEST_F(RetentionTest, FindLatestOfEmptyOrMissingDirectoryIsEmpty) {
  EXPECT_EQ(find_latest(dir_.string()), "");
  EXPECT_EQ(find_latest(path("absent")), "");
}

TEST_F(RetentionTest, PruneKeepsTheNewestStepFilesOnly) {
  for (int step : {100, 200, 300, 400, 1000}) touch(step_file_name(step));
  touch("last.h5");
  touch("step-00000050.h5.tmp");
  touch("notes.txt");
  prune(dir_.string(), 0);  // 0 keeps all
  EXPECT_EQ(names().size(), 8u);
  prune(dir_.string(), 2);
  EXPECT_EQ(names(), (std::set<std::string>{"step-00000400.h5", "step-00001000.h5", "last.h5",
                                            "step-00000050.h5.tmp", "notes.txt"}));
  prune(dir_.string(), 5);
  EXPECT_EQ(names().size(), 5u);
  EXPECT_THROW(prune(dir_.string(), -1), std::invalid_argument);
  EXPECT_NO_THROW(prune(path("absent"), 1));
}

}  // namespace
}  // namespace tandem::checkpoint
