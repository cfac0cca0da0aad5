#include "trainer/checkpoint/average.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/common/temp_dir.h"

namespace tandem::checkpoint {
namespace {

namespace fs = std::filesystem;

class AverageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tandem_average_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    remove_tree(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // A full training checkpoint of a three-tensor "model" whose values depend on `seed`, with a
  // moving average of the weights when `ema`.
  std::string save_checkpoint(const std::string& name, int64_t step, uint64_t seed,
                              int64_t rows = 3, bool ema = false) {
    torch::manual_seed(seed);
    CheckpointData d;
    d.step = step;
    d.world_size = 2;
    d.model = {{"embed.weight", torch::randn({rows, 4})},
               {"proj.bias", torch::randn({5}, torch::kFloat64)},
               {"norm.scale", torch::randn({})}};
    if (ema) {
      d.ema = {{"embed.weight", torch::randn({rows, 4})},
               {"proj.bias", torch::randn({5})},
               {"norm.scale", torch::randn({})}};
    }
    d.optimizer["exp_avg"] = {{"embed.weight", torch::ones({rows, 4})}};
    d.optimizer_step = step;
    d.rng = {"r0", "r1"};
    d.config_yaml = "step: " + std::to_string(step) + "\n";
    d.vocab = "vocab of step " + std::to_string(step);
    save(path(name), d);
    return path(name);
  }

  fs::path dir_;
};

// The mean of two tensors by a plain loop over their elements: float64 sum, halved, rounded once
// to the tensors' own dtype.
torch::Tensor naive_mean(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kFloat64).contiguous();
  const torch::Tensor y = b.to(torch::kFloat64).contiguous();
  torch::Tensor mean = torch::empty_like(x);
  const double* px = x.data_ptr<double>();
  const double* py = y.data_ptr<double>();
  double* pm = mean.data_ptr<double>();
  for (int64_t i = 0; i < x.numel(); ++i) pm[i] = (px[i] + py[i]) / 2.0;
  return mean.to(a.scalar_type());
}

TEST_F(AverageTest, TwoCheckpointsAverageToTheElementwiseMeanInTheirOwnDtype) {
  const std::string older = save_checkpoint("step-00000100.h5", 100, 1);
  const std::string newer = save_checkpoint("step-00000200.h5", 200, 2);
  const CheckpointData a = load(older), b = load(newer);
  const CheckpointData mean = average({older, newer});
  ASSERT_EQ(mean.model.size(), 3u);
  for (size_t i = 0; i < mean.model.size(); ++i) {
    const auto& [name, tensor] = mean.model[i];
    EXPECT_EQ(name, a.model[i].first);
    EXPECT_EQ(tensor.scalar_type(), a.model[i].second.scalar_type()) << name;
    EXPECT_EQ(tensor.sizes(), a.model[i].second.sizes()) << name;
    EXPECT_TRUE(torch::equal(tensor, naive_mean(a.model[i].second, b.model[i].second))) << name;
    EXPECT_FALSE(torch::equal(tensor, a.model[i].second)) << name;  // the inputs do differ
  }
}

TEST_F(AverageTest, MovingAveragesAreAveragedWhenEveryInputHasOne) {
  const std::string older = save_checkpoint("a.h5", 100, 1, 3, /*ema=*/true);
  const std::string newer = save_checkpoint("b.h5", 200, 2, 3, /*ema=*/true);
  const CheckpointData a = load(older), b = load(newer);
  const CheckpointData mean = average({older, newer});
  ASSERT_EQ(mean.ema.size(), 3u);
  for (size_t i = 0; i < mean.ema.size(); ++i) {
    EXPECT_EQ(mean.ema[i].first, a.ema[i].first);
    EXPECT_TRUE(torch::equal(mean.ema[i].second, naive_mean(a.ema[i].second, b.ema[i].second)))
        << mean.ema[i].first;
  }
  const std::string plain = save_checkpoint("c.h5", 300, 3);
  EXPECT_TRUE(average({older, plain, newer}).ema.empty());  // one input without: none
  EXPECT_TRUE(average({plain}).ema.empty());
}

TEST_F(AverageTest, MetadataComesFromTheNewestInputAndTheOptimizerIsDropped) {
  const std::string newer = save_checkpoint("b.h5", 200, 2);
  const std::string older = save_checkpoint("a.h5", 100, 1);
  CheckpointData mean = average({newer, older});  // newest by step, not by position
  EXPECT_EQ(mean.step, 200);
  EXPECT_EQ(mean.world_size, 2);
  EXPECT_EQ(mean.config_yaml, "step: 200\n");
  EXPECT_EQ(mean.vocab, "vocab of step 200");
  EXPECT_EQ(mean.averaged_from, (std::vector<std::string>{newer, older}));
  EXPECT_TRUE(mean.optimizer.empty());
  EXPECT_TRUE(mean.rng.empty());

  // Written and read back: the inputs are recorded, and both readers accept the file.
  save(path("avg.h5"), mean);
  const CheckpointData full = load(path("avg.h5"));
  EXPECT_EQ(full.averaged_from, mean.averaged_from);
  EXPECT_TRUE(full.optimizer.empty());
  const CheckpointData model_only = load_model_only(path("avg.h5"));
  ASSERT_EQ(model_only.model.size(), mean.model.size());
  for (size_t i = 0; i < mean.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(model_only.model[i].second, mean.model[i].second));
  }
  EXPECT_TRUE(load(newer).averaged_from.empty());  // training checkpoints carry no such attribute
}

TEST_F(AverageTest, AveragingOneCheckpointReproducesItsParameters) {
  const std::string only = save_checkpoint("a.h5", 100, 1);
  const CheckpointData mean = average({only});
  const CheckpointData input = load(only);
  for (size_t i = 0; i < mean.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(mean.model[i].second, input.model[i].second));
  }
}

TEST_F(AverageTest, MismatchedShapesNameTheFile) {
  const std::string a = save_checkpoint("a.h5", 100, 1);
  const std::string wide = save_checkpoint("wide.h5", 200, 2, /*rows=*/6);
  try {
    average({a, wide});
    FAIL() << "averaged checkpoints of different shapes";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("'" + wide + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("shape of embed.weight: checkpoint [6, 4] vs model [3, 4]"),
              std::string::npos)
        << message;
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  }
}

TEST_F(AverageTest, UnreadableInputIsNamed) {
  const std::string a = save_checkpoint("a.h5", 100, 1);
  try {
    average({a, path("absent.h5")});
    FAIL() << "averaged a missing file";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(path("absent.h5")), std::string::npos) << e.what();
  }
  EXPECT_THROW(average({}), std::invalid_argument);
}

TEST_F(AverageTest, LastStepFilesAreTheNewestOldestFirst) {
  for (int64_t step : {300, 100, 1000, 200}) save_checkpoint(step_file_name(step), step, 1);
  save_checkpoint("last.h5", 1000, 1);
  EXPECT_EQ(last_step_files(dir_.string(), 2),
            (std::vector<std::string>{path("step-00000300.h5"), path("step-00001000.h5")}));
  EXPECT_EQ(last_step_files(dir_.string(), 4).front(), path("step-00000100.h5"));
  try {
    last_step_files(dir_.string(), 5);
    FAIL() << "asked for more files than there are";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(dir_.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("holds 4 step-*.h5"), std::string::npos) << e.what();
  }
  EXPECT_THROW(last_step_files(path("absent"), 1), std::invalid_argument);
  EXPECT_THROW(last_step_files(dir_.string(), 0), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::checkpoint
