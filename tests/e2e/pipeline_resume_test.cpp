// Training's checkpoints through the real tools: a resumed, a killed and a re-sized run continue the
// uninterrupted one exactly; a checkpoint holds what the design lists; a resume that does not match
// the checkpoint is refused and leaves it intact.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "data/corpus/corpus.h"
#include "tests/e2e/pipeline_fixture.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"

namespace tandem::test {
namespace {

TEST_F(Pipeline, ResumedRunContinuesTheUninterruptedLossCurveExactly) {
  const std::string straight = file("run-straight");
  const std::string split = file("run-split");
  // The uninterrupted run reads its batches in the step; the split one from the prefetch thread,
  // three steps ahead, and stops mid-epoch (an epoch here is far more than 8 steps). Both keep a
  // moving average of the weights.
  const auto a = run_command(mpirun(2) + tool("tandem-train") + " --config " +
                             write_config("straight.yaml", straight) +
                             " --set data.prefetch_steps=0 --set train.ema_decay=0.9");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto cfg =
      write_config("split.yaml", split) + " --set data.prefetch_steps=3 --set train.ema_decay=0.9";
  const auto first = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                                 " --set train.max_steps=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg);
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("resuming from"), std::string::npos) << second.output;
  EXPECT_NE(second.output.find("at step 4"), std::string::npos) << second.output;

  const auto expected = metrics(straight);
  const auto resumed = metrics(split);
  ASSERT_EQ(expected.size(), 8u);
  ASSERT_EQ(resumed.size(), 8u);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(resumed[i]["step"], static_cast<int64_t>(i + 1));
    // Dropout is on: equality needs the data position, optimizer and every rank's RNG restored.
    EXPECT_EQ(resumed[i]["loss"].get<double>(), expected[i]["loss"].get<double>()) << "step " << i + 1;
  }
  const auto p = checkpoint::load(straight + "/last.h5");
  const auto q = checkpoint::load(split + "/last.h5");
  EXPECT_EQ(q.data_epoch, 0);
  EXPECT_EQ(q.data_next_batch, p.data_next_batch);
  ASSERT_EQ(p.model.size(), q.model.size());
  for (size_t i = 0; i < p.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(p.model[i].second, q.model[i].second)) << p.model[i].first;
  }
  ASSERT_EQ(p.ema.size(), p.model.size());
  ASSERT_EQ(q.ema.size(), p.model.size());
  for (size_t i = 0; i < p.ema.size(); ++i) {
    EXPECT_TRUE(torch::equal(p.ema[i].second, q.ema[i].second)) << p.ema[i].first;
    EXPECT_FALSE(torch::equal(p.ema[i].second, p.model[i].second)) << p.ema[i].first;
  }
}

// The average goes on from the checkpoint's at another world size: one step later it is
// d·average + (1 − d)·weights, d = (1 + 5) / (10 + 5) while warming up. Validation's scores, eval
// and decode use it unless asked for the raw weights.
TEST_F(Pipeline, MovingAverageContinuesAtAnotherWorldSizeAndIsWhatEvalTranslatesWith) {
  const std::string run = file("run-ema");
  const auto cfg = write_config("ema.yaml", run) + " --set train.ema_decay=0.999";
  const auto two = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                               " --set train.max_steps=4");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto one = run_command(mpirun(1) + tool("tandem-train") + " --config " + cfg +
                               " --set train.max_steps=5");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto before = checkpoint::load(run + "/step-00000004.h5");
  const auto after = checkpoint::load(run + "/last.h5");
  ASSERT_EQ(after.step, 5);
  ASSERT_EQ(after.world_size, 1);
  ASSERT_EQ(before.ema.size(), before.model.size());
  ASSERT_EQ(after.ema.size(), after.model.size());
  const double d = 6.0 / 15.0;
  for (size_t i = 0; i < after.ema.size(); ++i) {
    const torch::Tensor expected = before.ema[i].second.to(torch::kFloat64) * d +
                                   after.model[i].second.to(torch::kFloat64) * (1 - d);
    EXPECT_TRUE(torch::allclose(after.ema[i].second.to(torch::kFloat64), expected, 1e-6, 1e-7))
        << after.ema[i].first;
  }

  // A checkpoint whose weights are that average, and no average: what eval must score by default.
  checkpoint::CheckpointData swapped = checkpoint::load(run + "/last.h5");
  swapped.model = swapped.ema;
  swapped.ema.clear();
  checkpoint::save(file("ema-as-weights.h5"), swapped);
  const auto eval = [&](const std::string& checkpoint, const std::string& flags) {
    const auto r = run_command(tool("tandem-eval") + " --checkpoint " + checkpoint +
                               " --split valid --beam 2 --json" + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output.substr(r.output.rfind('{')));
  };
  const auto averaged = eval(run + "/last.h5", "");
  const auto raw = eval(run + "/last.h5", " --raw-weights");
  const auto reference = eval(file("ema-as-weights.h5"), "");
  EXPECT_EQ(averaged["weights"], "averaged");
  EXPECT_EQ(raw["weights"], "raw");
  EXPECT_EQ(reference["weights"], "raw");
  EXPECT_EQ(averaged["loss"].get<double>(), reference["loss"].get<double>());
  EXPECT_EQ(averaged["bleu"].get<double>(), reference["bleu"].get<double>());
  EXPECT_NE(averaged["loss"].get<double>(), raw["loss"].get<double>());
}

TEST_F(Pipeline, KilledWithSigkillThenResumedEqualsTheUninterruptedRun) {
  const std::string straight = file("run-kill-straight");
  const auto a = run_command(mpirun(2) + tool("tandem-train") + " --config " +
                             write_config("kill-straight.yaml", straight) + " --set train.max_steps=16");
  ASSERT_EQ(a.exit_code, 0) << a.output;

  const std::string killed = file("run-killed");
  const std::string cfg = write_config("killed.yaml", killed);
  {
    BackgroundCommand job(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                          " --set train.max_steps=100000");
    ASSERT_TRUE(job.wait_for_line("step-00000008.h5")) << job.output();
    // kill -9 the launcher and every rank at once: no chance to save or clean up. kill_all
    // returns once each of them is gone: a rank whose SIGKILL is still pending (in a disk write,
    // say) holds the directory's lock, and the resumed run below would be refused.
    job.kill_all();
    EXPECT_NE(job.wait(), 0) << job.output();
  }
  const auto resumed = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                                   " --set train.max_steps=16");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;

  // The metrics file tells one history: steps the killed run logged after its last checkpoint
  // were dropped and logged again, with the same values.
  const auto expected = metrics(straight);
  const auto got = metrics(killed);
  ASSERT_EQ(expected.size(), 16u);
  ASSERT_EQ(got.size(), 16u);
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(got[i]["step"], expected[i]["step"]);
    EXPECT_EQ(got[i]["loss"].get<double>(), expected[i]["loss"].get<double>()) << "step " << i + 1;
  }
  const auto p = checkpoint::load(straight + "/last.h5");
  const auto q = checkpoint::load(killed + "/last.h5");
  ASSERT_EQ(p.model.size(), q.model.size());
  for (size_t i = 0; i < p.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(p.model[i].second, q.model[i].second)) << p.model[i].first;
  }
}

TEST_F(Pipeline, ACheckpointOfTwoRanksContinuesAtOneAndAtFourFromTheSameGlobalBatch) {
  const std::string run = file("run-world");
  const auto cfg = write_config("world.yaml", run);
  const auto train = [&](int ranks, int steps) {
    return run_command(mpirun(ranks) + tool("tandem-train") + " --config " + cfg +
                       " --set train.max_steps=" + std::to_string(steps));
  };
  ASSERT_EQ(train(2, 4).exit_code, 0);
  EXPECT_EQ(checkpoint::load(run + "/last.h5").data_next_batch, 8);  // 4 steps x 2 ranks
  const auto one = train(1, 6);
  ASSERT_EQ(one.exit_code, 0) << one.output;
  EXPECT_NE(one.output.find("written by 2 rank(s), continuing with 1"), std::string::npos) << one.output;
  EXPECT_EQ(checkpoint::load(run + "/last.h5").data_next_batch, 10);  // the cursor moved on by 2 x 1
  const auto four = train(4, 8);
  ASSERT_EQ(four.exit_code, 0) << four.output;
  EXPECT_NE(four.output.find("written by 1 rank(s), continuing with 4"), std::string::npos) << four.output;
  const auto last = checkpoint::load(run + "/last.h5");
  EXPECT_EQ(last.data_epoch, 0);
  EXPECT_EQ(last.data_next_batch, 18);  // and by 2 x 4: batches 10..17 went to ranks 0..3
  EXPECT_EQ(last.world_size, 4);

  // The loss goes on from where it was rather than jumping back to an untrained model's.
  const auto records = metrics(run);
  ASSERT_EQ(records.size(), 8u);
  const double first = records[0]["loss"], before = records[3]["loss"];
  for (size_t i = 4; i < records.size(); ++i) {
    const double loss = records[i]["loss"];
    EXPECT_LT(loss, first) << "step " << i + 1;
    EXPECT_LT(std::abs(loss - before), 0.5 * before) << "step " << i + 1;
  }
}

TEST_F(Pipeline, CheckpointHoldsEverythingTheDesignLists) {
  const std::string run = file("run-contents");
  const auto r = run_command(mpirun(2) + tool("tandem-train") + " --config " +
                             write_config("contents.yaml", run));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto c = checkpoint::load(run + "/last.h5");
  EXPECT_EQ(c.step, 8);
  EXPECT_EQ(c.world_size, 2);
  std::map<std::string, torch::Tensor> model(c.model.begin(), c.model.end());
  ASSERT_TRUE(model.count("encoder.layers.0.self_attn.q_proj.weight"));
  EXPECT_EQ(model["encoder.layers.0.self_attn.q_proj.weight"].sizes(), torch::IntArrayRef({32, 32}));
  ASSERT_TRUE(c.optimizer.count("exp_avg") && c.optimizer.count("exp_avg_sq"));
  EXPECT_EQ(c.optimizer.at("exp_avg").size(), c.model.size());
  EXPECT_EQ(c.optimizer_step, 8);
  EXPECT_GT(c.data_next_batch + c.data_epoch, 0);
  ASSERT_EQ(c.rng.size(), 2u);
  EXPECT_NE(c.rng[0], c.rng[1]);  // dropout streams differ per rank
  const auto config = config::parse_config(c.config_yaml, "checkpoint");
  EXPECT_EQ(config.model.d_model, 32);
  EXPECT_EQ(config.train.max_steps, 8);
  EXPECT_EQ(data::Vocab::from_bytes(c.vocab).size(), data::Corpus(file("prepped.h5")).vocab().size());
  EXPECT_FALSE(c.torch_version.empty());
  EXPECT_FALSE(c.created.empty());
  EXPECT_TRUE(std::ifstream(run + "/step-00000004.h5").good());
  EXPECT_TRUE(std::ifstream(run + "/step-00000008.h5").good());
}

TEST_F(Pipeline, ResumingOnACorpusWithAnotherVocabularyIsRefused) {
  const std::string run = file("run-vocab");
  const auto cfg = write_config("vocab.yaml", run);
  ASSERT_EQ(run_command(tool("tandem-train") + " --config " + cfg + " --set train.max_steps=2").exit_code, 0);
  const auto prep = run_command(tool("tandem-prep") + " --train-src " + file("valid.src") +
                                " --train-tgt " + file("valid.tgt") + " --vocab-size 30 --out " +
                                file("other.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const auto r = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                             " --set data.corpus=" + file("other.h5") + " --set train.max_steps=4");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("its vocabulary differs from corpus"), std::string::npos) << r.output;
  EXPECT_EQ(checkpoint::load(run + "/last.h5").step, 2);
}

// The activation and the position layout leave the parameters' names and shapes as they are, so
// resuming checks them by the checkpoint's config: another one is refused, the checkpoint kept.
TEST_F(Pipeline, ResumingWithAnotherActivationOrPositionLayoutIsRefused) {
  const std::string run = file("run-function");
  const auto cfg = two_steps("function.yaml", run);
  for (const std::string flag : {"model.activation=swish", "model.positions=halves"}) {
    const auto r = run_command(tool("tandem-train") + " --config " + cfg + " --set " + flag +
                               " --set train.max_steps=4");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("was trained with model.activation relu, model.positions "
                            "interleaved; this run's config says"),
              std::string::npos)
        << r.output;
  }
  EXPECT_EQ(checkpoint::load(run + "/last.h5").step, 2);
}

TEST_F(Pipeline, AFailedStartLeavesExistingCheckpointsIntact) {
  const std::string run = file("run-keep");
  const auto cfg = write_config("keep.yaml", run);
  ASSERT_EQ(run_command(tool("tandem-train") + " --config " + cfg + " --set train.max_steps=4").exit_code, 0);
  const auto before = checkpoint::load(run + "/last.h5");
  const auto bad = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                               " --set model.d_model=48");  // shape differs from the checkpoint
  EXPECT_NE(bad.exit_code, 0) << bad.output;
  EXPECT_NE(bad.output.find("step-00000004.h5"), std::string::npos) << bad.output;
  const auto after = checkpoint::load(run + "/last.h5");
  EXPECT_EQ(after.step, 4);
  for (size_t i = 0; i < before.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(before.model[i].second, after.model[i].second));
  }
}

}  // namespace
}  // namespace tandem::test
