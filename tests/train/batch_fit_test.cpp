// data.max_tokens: auto (batch_fit.h) where no GPU is needed: the halving search, a trial step
// that leaves no gradients behind, and a Trainer's choice on a CPU afresh (4,096) and when it
// resumes a run that trained with another number (that number). Run at np 1 and np 2.
#include "trainer/train/batch_fit.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "tests/common/mpi_test.h"
#include "tests/common/synthetic_corpus.h"
#include "trainer/common/temp_dir.h"
#include "trainer/model_io/model_io.h"
#include "trainer/train/trainer.h"

namespace tandem::train {
namespace {

TEST(BatchFit, LargestFittingHalvesFromTheTop) {
  std::vector<int64_t> tried;
  EXPECT_EQ(largest_fitting(65536, 1024,
                            [&](int64_t tokens) {
                              tried.push_back(tokens);
                              return tokens <= 20000;
                            }),
            16384);
  EXPECT_EQ(tried, (std::vector<int64_t>{65536, 32768, 16384}));
  EXPECT_EQ(largest_fitting(65536, 1024, [](int64_t) { return true; }), 65536);
  EXPECT_EQ(largest_fitting(4096, 1024, [](int64_t tokens) { return tokens <= 1024; }), 1024);
  EXPECT_EQ(largest_fitting(65536, 1024, [](int64_t) { return false; }), 0);
}

// A directory of rank 0's holding a synthetic corpus, known to every rank.
class SharedDir {
 public:
  SharedDir() {
    auto& comm = test::process_group().cpu();
    std::string root;
    if (comm.rank() == 0) {
      dir_ = std::make_unique<TempDir>("batch-fit");
      test::make_reverse_corpus(dir_->path());
      root = dir_->path();
    }
    root_ = comm.broadcast_bytes(root, 0);
  }
  ~SharedDir() { test::process_group().cpu().barrier(); }
  const std::string& root() const { return root_; }

 private:
  std::unique_ptr<TempDir> dir_;
  std::string root_;
};

config::Config small_run(const std::string& root, const std::string& run) {
  config::Config c;
  c.model.d_model = 16;
  c.model.heads = 2;
  c.model.encoder_layers = 1;
  c.model.decoder_layers = 1;
  c.model.d_ff = 32;
  c.data.corpus = root + "/corpus.h5";
  c.train.device = config::Device::kCpu;
  c.train.max_steps = 2;
  c.checkpoint.dir = root + "/" + run;
  c.checkpoint.every_steps = 0;
  c.log.every_steps = 1;
  return c;
}

TEST(BatchFit, AStepTrialLeavesNoGradientsBehind) {
  torch::manual_seed(5);
  const int64_t vocab = 50;
  model::Transformer model(checkpoint::model_options(small_run("", "").model, vocab));
  EXPECT_TRUE(step_fits(model, runtime::DeviceChoice{}, 256, 16, vocab));
  for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
}

TEST(BatchFit, AutoIsTheCpuDefaultAfreshAndTheResumedRunsOwnNumber) {
  SharedDir dir;
  auto& group = test::process_group();
  config::Config fresh = small_run(dir.root(), "fresh");
  fresh.data.max_tokens = config::kAutoMaxTokens;
  EXPECT_EQ(Trainer(fresh, group).config().data.max_tokens, kCpuAutoTokens);

  config::Config first = small_run(dir.root(), "resumed");
  first.data.max_tokens = 512;
  ASSERT_EQ(Trainer(first, group).run(), 0);  // saves step 2 at its end
  config::Config again = first;
  again.data.max_tokens = config::kAutoMaxTokens;
  again.train.max_steps = 3;
  Trainer resumed(again, group);
  EXPECT_EQ(resumed.step(), 2);
  EXPECT_EQ(resumed.config().data.max_tokens, 512);
}

}  // namespace
}  // namespace tandem::train
