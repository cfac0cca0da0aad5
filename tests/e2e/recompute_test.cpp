// train.checkpoint_activations changes nothing but memory: the tiny preset with its dropout (0.1)
// trained 20 steps on 2 ranks with every layer recomputed in the backward pass writes bitwise the
// checkpoints of the same run without it, at step 10 and at step 20; so does a LoRA run (adapters
// beside every projection, their dropout 0.1 too) on a base of that shape.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/checkpoint_checks.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

// tandem-train on 2 ranks with the tiny preset on `dir`'s corpus into dir/<run>, checkpoints
// every 10 steps kept, and `settings` (--set ...).
void train(const TempDir& dir, const std::string& run, const std::string& settings) {
  const std::string command =
      mpirun(2) + tool("tandem-train") + " --config " + std::string(TANDEM_SOURCE_DIR) +
      "/configs/tiny.yaml --set data.corpus=" + dir.file("corpus.h5") +
      " --set checkpoint.dir=" + dir.file(run) +
      " --set train.max_minutes=0 --set data.max_tokens=512"
      " --set checkpoint.every_steps=10 --set checkpoint.keep_last=0 --set valid.every_steps=0"
      " --set log.every_steps=5 " +
      settings;
  const auto r = run_command(command);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

TEST(RecomputeE2E, RecomputedLayersWithDropoutWriteBitwiseTheCheckpointsOfARunWithout) {
  TempDir dir("e2e-recompute");
  make_reverse_corpus(dir.path());
  for (const std::string recompute : {"false", "true"}) {
    train(dir, "run-" + recompute,
          "--set train.max_steps=20 --set train.checkpoint_activations=" + recompute);
  }
  for (const std::string file : {"step-00000010.h5", "step-00000020.h5"}) {
    expect_same_checkpoint(dir.file("run-false"), dir.file("run-true"), file);
  }
  // The average trained: it is neither the weights nor where it started.
  const auto last = checkpoint::load(dir.file("run-true") + "/last.h5");
  EXPECT_FALSE(torch::equal(last.ema.front().second, last.model.front().second));
}

TEST(RecomputeE2E, RecomputedLayersOfALoraRunWriteBitwiseItsCheckpointsWithout) {
  TempDir dir("e2e-recompute-lora");
  make_reverse_corpus(dir.path());
  train(dir, "base", "--set train.max_steps=10");
  for (const std::string recompute : {"false", "true"}) {
    train(dir, "lora-" + recompute,
          "--set train.max_steps=20 --set lora.base=" + dir.file("base/step-00000010.h5") +
              " --set lora.targets=q_proj,k_proj,v_proj,out_proj,fc1,fc2 --set lora.dropout=0.1"
              " --set train.checkpoint_activations=" +
              recompute);
  }
  for (const std::string file : {"step-00000010.h5", "step-00000020.h5"}) {
    expect_same_checkpoint(dir.file("lora-false"), dir.file("lora-true"), file);
  }
  const auto last = checkpoint::load(dir.file("lora-true") + "/last.h5");
  EXPECT_EQ(last.model.size(), 2u * (3 * 6 + 3 * 10));  // A and B beside every projection
  EXPECT_EQ(last.lora_base_hash.size(), 16u);
}

}  // namespace
}  // namespace tandem::test
