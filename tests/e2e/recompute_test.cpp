// train.checkpoint_activations changes nothing but memory: the tiny preset with its dropout (0.1)
// trained 20 steps on 2 ranks with every layer recomputed in the backward pass writes bitwise the
// checkpoints of the same run without it, at step 10 and at step 20.
#include <gtest/gtest.h>

#include <string>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/checkpoint_checks.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

TEST(RecomputeE2E, RecomputedLayersWithDropoutWriteBitwiseTheCheckpointsOfARunWithout) {
  TempDir dir("e2e-recompute");
  make_reverse_corpus(dir.path());
  for (const std::string recompute : {"false", "true"}) {
    const std::string command =
        mpirun(2) + tool("tandem-train") + " --config " + std::string(TANDEM_SOURCE_DIR) +
        "/configs/tiny.yaml --set data.corpus=" + dir.file("corpus.h5") +
        " --set checkpoint.dir=" + dir.file("run-" + recompute) +
        " --set train.max_steps=20 --set train.max_minutes=0 --set data.max_tokens=512"
        " --set checkpoint.every_steps=10 --set checkpoint.keep_last=0 --set valid.every_steps=0"
        " --set log.every_steps=5 --set train.checkpoint_activations=" +
        recompute;
    const auto r = run_command(command);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("checkpoint_activations: " + recompute), std::string::npos) << r.output;
  }
  for (const std::string file : {"step-00000010.h5", "step-00000020.h5"}) {
    expect_same_checkpoint(dir.file("run-false"), dir.file("run-true"), file);
  }
  // The average trained: it is neither the weights nor where it started.
  const auto last = checkpoint::load(dir.file("run-true") + "/last.h5");
  EXPECT_FALSE(torch::equal(last.ema.front().second, last.model.front().second));
}

}  // namespace
}  // namespace tandem::test
