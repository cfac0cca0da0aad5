// Fine-tuning through the real tools: the flags that reset the optimizer and the data position, and
// a corpus prepared with a checkpoint's vocabulary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "data/corpus/corpus.h"
#include "tests/e2e/pipeline_fixture.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

TEST_F(Pipeline, FineTuningFlagsResetOptimizerAndDataPosition) {
  const std::string run = file("run-reset");
  const auto cfg = write_config("reset.yaml", run);
  ASSERT_EQ(run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                        " --set train.max_steps=4").exit_code, 0);
  const auto before = checkpoint::load(run + "/last.h5");
  const auto r = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                             " --set train.max_steps=5 --reset-optimizer --reset-data");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("optimizer state reset, data position reset"), std::string::npos) << r.output;
  const auto after = checkpoint::load(run + "/last.h5");
  EXPECT_EQ(after.step, 5);
  // One step from a fresh position at world 2 consumed global batches 0 and 1 of epoch 0.
  EXPECT_EQ(after.data_epoch, 0);
  EXPECT_EQ(after.data_next_batch, 2);
  EXPECT_EQ(before.data_next_batch, 8);
  // Adam restarted from zero moments, so it has made one update, not five.
  EXPECT_EQ(after.optimizer_step, 1);
}

// Fine-tuning on other text: tandem-prep --vocab-from a checkpoint binarizes it with the
// checkpoint's vocabulary (none trained), and training continues on it.
TEST_F(Pipeline, ACorpusPreparedWithACheckpointsVocabularyContinuesItsTraining) {
  const std::string run = file("run-vocab-from");
  const auto cfg = two_steps("vocab-from.yaml", run);
  const std::string other = file("other-vocab-from.h5");
  const auto prep = run_command(tool("tandem-prep") + " --train-src " + file("valid.src") +
                                " --train-tgt " + file("valid.tgt") + " --vocab-from " + run +
                                "/last.h5 --out " + other);
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const auto vocab = data::Vocab::from_bytes(checkpoint::load(run + "/last.h5").vocab);
  const data::Corpus corpus(other);
  EXPECT_EQ(corpus.vocab().bytes(), vocab.bytes());
  std::ifstream valid_src(file("valid.src"));
  std::string first_line;
  ASSERT_TRUE(std::getline(valid_src, first_line));
  EXPECT_EQ(corpus.read("train", {0})[0].src, vocab.encode(first_line, data::Side::kSource));
  const auto r = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                             " --set data.corpus=" + other +
                             " --set train.max_steps=4 --reset-data");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(checkpoint::load(run + "/last.h5").step, 4);
  // Not a Tandem file, or a vocabulary asked for both ways: usage errors.
  const auto junk = run_command(tool("tandem-prep") + " --train-src " + file("valid.src") +
                                " --train-tgt " + file("valid.tgt") + " --vocab-from " +
                                file("valid.src") + " --out " + file("junk.h5"));
  EXPECT_EQ(junk.exit_code, 2) << junk.output;
  EXPECT_NE(junk.output.find("--vocab-from '" + file("valid.src") + "': neither"),
            std::string::npos)
      << junk.output;
  const auto both = run_command(tool("tandem-prep") + " --train-src " + file("valid.src") +
                                " --train-tgt " + file("valid.tgt") + " --vocab-from " + run +
                                "/last.h5 --vocab-size 30 --out " + file("junk.h5"));
  EXPECT_EQ(both.exit_code, 2) << both.output;
  EXPECT_FALSE(std::filesystem::exists(file("junk.h5")));
}

}  // namespace
}  // namespace tandem::test
