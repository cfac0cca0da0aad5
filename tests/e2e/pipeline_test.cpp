// The whole pipeline through the real tools: tandem-prep → mpirun tandem-train → checkpoints and
// resume → tandem-eval → tandem-decode, on a synthetic reverse-the-words corpus.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/corpus.h"
#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"

namespace tandem::test {
namespace {

// Whether `--device auto` would take a GPU here.
bool gpu_visible() { return torch::cuda::is_available(); }

class Pipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e");
    // Text files from the fixture generator, binarized by the real tandem-prep binary.
    SyntheticCorpusOptions options;
    options.train_pairs = 3000;  // enough distinct sentences that reversing must be learned, not memorised
    make_reverse_corpus(dir_->path(), options);
    const auto prep = run_command(
        tool("tandem-prep") + " --train-src " + file("train.src") + " --train-tgt " +
        file("train.tgt") + " --valid-src " + file("valid.src") + " --valid-tgt " +
        file("valid.tgt") + " --test-src " + file("test.src") + " --test-tgt " + file("test.tgt") +
        " --vocab-size 64 --out " + file("prepped.h5"));
    ASSERT_EQ(prep.exit_code, 0) << prep.output;
    prep_output_ = new std::string(prep.output);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete prep_output_;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }

  // A small config: 1+1 layers of width 32, dropout on, a checkpoint every 4 steps.
  static std::string write_config(const std::string& name, const std::string& run_dir) {
    const std::string path = file(name);
    write_file(path, "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, dropout: 0.1}\n"
                     "data: {corpus: " + file("prepped.h5") + ", max_tokens: 256, seed: 3}\n"
                     "train: {max_steps: 8, lr: 0.003, clip_norm: 1.0, seed: 5, threads: 1}\n"
                     "checkpoint: {dir: " + run_dir + ", every_steps: 4, keep_last: 0}\n"
                     "dist: {check_every_steps: 2}\n"
                     "log: {every_steps: 1}\n");
    return path;
  }

  // write_config into `run_dir`, then 2 steps on one rank; the config's path.
  static std::string two_steps(const std::string& name, const std::string& run_dir) {
    const auto cfg = write_config(name, run_dir);
    const auto r =
        run_command(tool("tandem-train") + " --config " + cfg + " --set train.max_steps=2");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return cfg;
  }

  static std::vector<nlohmann::json> metrics(const std::string& run_dir) {
    std::ifstream in(run_dir + "/metrics.jsonl");
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  static TempDir* dir_;
  static std::string* prep_output_;
};
TempDir* Pipeline::dir_ = nullptr;
std::string* Pipeline::prep_output_ = nullptr;

TEST_F(Pipeline, PrepWritesEverySplitAndPrintsASummary) {
  data::Corpus corpus(file("prepped.h5"));
  EXPECT_EQ(corpus.size("train"), 3000);
  EXPECT_EQ(corpus.size("valid"), 40);
  EXPECT_EQ(corpus.size("test"), 40);
  // 16 words need fewer pieces than asked for; SentencePiece stops early rather than failing.
  EXPECT_GT(corpus.vocab().size(), 16);
  EXPECT_LE(corpus.vocab().size(), 64);
  EXPECT_NE(prep_output_->find("train"), std::string::npos) << *prep_output_;
}

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

TEST_F(Pipeline, LearnsToReverseAndEvalDecodeAgree) {
  const std::string run = file("run-learn");
  const auto cfg = write_config("learn.yaml", run);
  const auto r = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                             " --set train.max_steps=400 --set data.max_tokens=512 --set model.d_model=64 --set model.d_ff=128"
                             " --set model.encoder_layers=2 --set model.decoder_layers=2"
                             " --set model.dropout=0 --set model.max_positions=128"
                             " --set checkpoint.every_steps=0 --set log.every_steps=50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto eval = run_command(tool("tandem-eval") + " --checkpoint " + run +
                                "/last.h5 --split test --json --output " + file("test.hyp"));
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const auto record = nlohmann::json::parse(eval.output.substr(eval.output.rfind('{')));
  EXPECT_GE(record["accuracy"].get<double>(), 0.95) << eval.output;
  EXPECT_GE(record["bleu"].get<double>(), 80.0) << eval.output;

  // tandem-decode on the raw test sources gives the same translations, in order.
  const auto decoded = run_command(tool("tandem-decode") + " --checkpoint " + run + "/last.h5 < " +
                                   file("test.src") + " 2>/dev/null");
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  std::ifstream hyp(file("test.hyp"));
  std::stringstream expected;
  expected << hyp.rdbuf();
  EXPECT_EQ(decoded.output, expected.str());

  // A line longer than the position table is cut with a warning; the other lines still translate.
  std::string long_line = "red";
  for (int i = 0; i < 200; ++i) long_line += " green";
  write_file(file("long.src"), long_line + "\nred blue\n");
  const auto cut = run_command(tool("tandem-decode") + " --checkpoint " + run + "/last.h5 < " +
                               file("long.src"));
  EXPECT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("1 sentence(s) longer than 127 tokens were truncated"), std::string::npos)
      << cut.output;
  // The short line translates as it does alone (the long one neither breaks nor shifts it).
  write_file(file("short.src"), "red blue\n");
  const auto alone = run_command(tool("tandem-decode") + " --checkpoint " + run + "/last.h5 < " +
                                 file("short.src") + " 2>/dev/null");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  ASSERT_FALSE(alone.output.empty());
  EXPECT_NE(cut.output.find("\n" + alone.output), std::string::npos) << cut.output;

  // Beam 4 over mixed lengths in small batches and chunks: each output line is its input line's
  // translation alone, in input order (batches are cut from length-sorted sentences).
  std::ifstream test_src(file("test.src"));
  std::vector<std::string> mixed;
  for (std::string line; mixed.size() < 12 && std::getline(test_src, line);) mixed.push_back(line);
  std::stable_sort(mixed.begin(), mixed.end(),
                   [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  for (size_t i = 1; i < mixed.size(); i += 2) std::swap(mixed[i], mixed[mixed.size() - i]);
  std::string mixed_text;
  for (const auto& line : mixed) mixed_text += line + "\n";
  write_file(file("mixed.src"), mixed_text);
  const std::string beam4 = tool("tandem-decode") + " --checkpoint " + run + "/last.h5 --beam 4";
  const auto batched = run_command(beam4 + " --batch-tokens 40 --chunk-lines 5 < " +
                                   file("mixed.src") + " 2>/dev/null");
  ASSERT_EQ(batched.exit_code, 0) << batched.output;
  std::string one_by_one;
  for (size_t i = 0; i < mixed.size(); ++i) {
    write_file(file("one.src"), mixed[i] + "\n");
    const auto one = run_command(beam4 + " < " + file("one.src") + " 2>/dev/null");
    ASSERT_EQ(one.exit_code, 0) << one.output;
    one_by_one += one.output;
  }
  EXPECT_EQ(batched.output, one_by_one);

  const auto rescored = run_command(tool("tandem-eval") + " --hyp " + file("test.hyp") + " --ref " +
                                    file("test.tgt") + " --json");
  ASSERT_EQ(rescored.exit_code, 0) << rescored.output;
  const auto again = nlohmann::json::parse(rescored.output.substr(rescored.output.rfind('{')));
  EXPECT_NEAR(again["bleu"].get<double>(), record["bleu"].get<double>(), 1e-9);
}

TEST_F(Pipeline, CheckpointsOfARunTranslateAsAnEnsembleAndOneTwiceTranslatesAsItselfAlone) {
  const std::string run = file("run-ensemble");
  const auto cfg = write_config("ensemble.yaml", run);
  const auto train = run_command(tool("tandem-train") + " --config " + cfg +
                                 " --set train.max_steps=40 --set checkpoint.every_steps=20");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  const std::string last = run + "/last.h5", earlier = run + "/step-00000020.h5";
  const std::string input = " < " + file("test.src") + " 2>/dev/null";

  // A checkpoint with itself: the same n-best lists, scores included, as the checkpoint alone.
  const std::string decode = tool("tandem-decode") + " --beam 4 --nbest 4 --threads 1";
  const auto alone = run_command(decode + " --checkpoint " + last + input);
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const auto twice =
      run_command(decode + " --checkpoint " + last + " --checkpoint " + last + input);
  ASSERT_EQ(twice.exit_code, 0) << twice.output;
  EXPECT_EQ(twice.output, alone.output);

  // Two threads share the batches and give the same lines.
  const auto threaded = run_command(tool("tandem-decode") + " --beam 4 --nbest 4 --threads 2" +
                                    " --checkpoint " + last + input);
  ASSERT_EQ(threaded.exit_code, 0) << threaded.output;
  EXPECT_EQ(threaded.output, alone.output);

  // Sampling: a line's draws depend on the seed and its index alone, so chunks of 3 lines on two
  // threads give the bytes one chunk on one thread gives; another seed gives other lines.
  const std::string sample =
      tool("tandem-decode") + " --sampling topk:5 --checkpoint " + last + " --temperature 1.2";
  const auto seeded = run_command(sample + " --seed 4 --threads 1" + input);
  const auto chunked = run_command(sample + " --seed 4 --threads 2 --chunk-lines 3" + input);
  const auto reseeded = run_command(sample + " --seed 5 --threads 1" + input);
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  EXPECT_EQ(chunked.output, seeded.output);
  EXPECT_NE(reseeded.output, seeded.output);
  EXPECT_EQ(lines_of(seeded.output).size(), lines_of(read_text(file("test.src"))).size());

  // --device cpu is the default; auto is the CPU where no GPU is visible (as in CI).
  for (const std::string device : {"cpu", "auto"}) {
    const auto placed =
        run_command(decode + " --device " + device + " --checkpoint " + last + input);
    ASSERT_EQ(placed.exit_code, 0) << placed.output;
    if (device == "cpu" || !gpu_visible()) {
      EXPECT_EQ(placed.output, alone.output) << device;
    }
  }

  // int8: the same number of lines, most of them the same translation (scores differ a little).
  const auto int8 = run_command(decode + " --precision int8 --checkpoint " + last + input);
  ASSERT_EQ(int8.exit_code, 0) << int8.output;
  std::istringstream float_lines(alone.output), int8_lines(int8.output);
  int lines = 0, same = 0;
  for (std::string a, b; std::getline(float_lines, a);) {
    ASSERT_TRUE(std::getline(int8_lines, b)) << "int8 wrote fewer lines";
    ++lines;
    same += a.substr(0, a.rfind(" ||| ")) == b.substr(0, b.rfind(" ||| "));
  }
  EXPECT_GE(same, lines / 2) << same << " of " << lines << " n-best lines unchanged in int8";

  // Two checkpoints of the run: scored by the normalised weighted geometric mean of their
  // distributions, whose loss is at most the weighted mean of theirs (Hoelder's inequality).
  auto eval = [&](const std::string& checkpoints) {
    const auto r = run_command(tool("tandem-eval") + checkpoints + " --split test --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(r.output.substr(r.output.rfind("\n{") + 1));  // the last line
  };
  const auto late = eval(" --checkpoint " + last);
  const auto early = eval(" --checkpoint " + earlier);
  const auto both = eval(" --checkpoint " + last + " --checkpoint " + earlier);
  ASSERT_EQ(both["checkpoints"].size(), 2u) << both.dump();
  EXPECT_EQ(both["checkpoints"][0]["step"], 40);
  EXPECT_EQ(both["checkpoints"][1]["step"], 20);
  EXPECT_DOUBLE_EQ(both["checkpoints"][1]["ensemble_weight"].get<double>(), 0.5);
  EXPECT_LE(both["loss"].get<double>(),
            0.5 * (late["loss"].get<double>() + early["loss"].get<double>()) + 1e-6)
      << late.dump() << "\n"
      << early.dump() << "\n"
      << both.dump();
  EXPECT_NE(both["loss"].get<double>(), late["loss"].get<double>());
  const auto weighted =
      eval(" --checkpoint " + last + " --checkpoint " + earlier + " --weights 3 1");
  EXPECT_DOUBLE_EQ(weighted["checkpoints"][0]["ensemble_weight"].get<double>(), 0.75);
  EXPECT_LE(weighted["loss"].get<double>(),
            0.75 * late["loss"].get<double>() + 0.25 * early["loss"].get<double>() + 1e-6);

  // A checkpoint of another vocabulary, or a weight too many, is refused on one line (exit 2).
  const auto prep =
      run_command(tool("tandem-prep") + " --train-src " + file("valid.src") + " --train-tgt " +
                  file("valid.tgt") + " --vocab-size 30 --out " + file("other-vocab.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string other_run = file("run-other-vocab");
  ASSERT_EQ(run_command(tool("tandem-train") + " --config " + cfg +
                        " --set data.corpus=" + file("other-vocab.h5") +
                        " --set checkpoint.dir=" + other_run + " --set train.max_steps=2")
                .exit_code,
            0);
  const auto foreign = run_command(tool("tandem-decode") + " --checkpoint " + last +
                                   " --checkpoint " + other_run + "/last.h5 < /dev/null");
  EXPECT_EQ(foreign.exit_code, 2) << foreign.output;
  EXPECT_NE(foreign.output.find("checkpoint '" + other_run +
                                "/last.h5' has another vocabulary than '" + last + "'"),
            std::string::npos)
      << foreign.output;
  const auto extra =
      run_command(tool("tandem-eval") + " --checkpoint " + last + " --weights 1 2 --split test");
  EXPECT_EQ(extra.exit_code, 2) << extra.output;
  EXPECT_NE(extra.output.find("--weights has 2 values for 1 --checkpoint"), std::string::npos)
      << extra.output;
}

TEST_F(Pipeline, BadInputGetsExitCode2AndNamesTheCulprit) {
  struct Case {
    std::string command;
    std::string must_mention;
  };
  write_file(file("typo.yaml"), "model: {d_modle: 32}\ndata: {corpus: x.h5}\n");
  write_file(file("short.tgt"), "one line\n");
  write_file(file("not-hdf5.h5"), "plain text\n");
  const std::vector<Case> cases = {
      {tool("tandem-train") + " --config " + file("missing.yaml"), "missing.yaml"},
      {tool("tandem-train") + " --config " + file("typo.yaml"), "model.d_model"},
      {tool("tandem-train") + " --config " + write_config("types.yaml", file("run-types")) +
           " --set train.lr=fast",
       "train.lr"},
      {tool("tandem-prep") + " --train-src " + file("train.src") + " --train-tgt " +
           file("short.tgt") + " --out " + file("bad.h5"),
       "short.tgt"},
      {tool("tandem-prep") + " --train-src " + file("nope.src") + " --train-tgt " +
           file("train.tgt") + " --out " + file("bad.h5"),
       "nope.src"},
      {tool("tandem-eval") + " --checkpoint " + file("prepped.h5") + " --split test", "prepped.h5"},
      {tool("tandem-eval") + " --checkpoint " + file("not-hdf5.h5") + " --split test",
       "not-hdf5.h5"},
      {tool("tandem-decode") + " --checkpoint " + file("absent.h5") + " < /dev/null", "absent.h5"},
      {tool("tandem-decode") + " --device gpu --checkpoint " + file("absent.h5") + " < /dev/null",
       "--device 'gpu'"},
      {tool("tandem-eval") + " --hyp " + file("short.tgt") + " --ref " + file("test.tgt"),
       "short.tgt"},
      {tool("tandem-train") + " --config " + file("types.yaml") + " --no-such-flag",
       "--no-such-flag"},
  };
  for (const auto& c : cases) {
    const auto r = run_command(c.command);
    EXPECT_EQ(r.exit_code, 2) << c.command << "\n" << r.output;
    EXPECT_NE(r.output.find(c.must_mention), std::string::npos) << c.command << "\n" << r.output;
  }
  EXPECT_FALSE(std::ifstream(file("bad.h5")).good()) << "a failed tandem-prep left a file behind";
}

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

TEST_F(Pipeline, ValidationKeepsTheBestCheckpointAndAgreesWithTandemEval) {
  const std::string run = file("run-valid");
  const auto r = run_command(mpirun(2) + tool("tandem-train") + " --config " +
                             write_config("valid.yaml", run) +
                             " --set train.max_steps=60 --set valid.every_steps=20"
                             " --set data.max_tokens=512 --set model.dropout=0");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("validation at step 60"), std::string::npos) << r.output;
  std::vector<nlohmann::json> validations;
  for (const auto& record : metrics(run)) {
    if (record.contains("valid_bleu")) validations.push_back(record);
  }
  ASSERT_EQ(validations.size(), 3u);
  size_t best = 0;
  for (size_t i = 1; i < validations.size(); ++i) {
    if (validations[i]["valid_bleu"].get<double>() > validations[best]["valid_bleu"].get<double>()) best = i;
  }
  const int64_t best_step = validations[best]["step"];
  EXPECT_EQ(validations.back()["best_step"].get<int64_t>(), best_step);
  EXPECT_EQ(checkpoint::load(run + "/best.h5").step, best_step);

  // Two ranks each translated half the valid split; one tandem-eval process must agree.
  const auto eval = run_command(tool("tandem-eval") + " --checkpoint " + run +
                                "/best.h5 --split valid --beam 1 --json");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const auto record = nlohmann::json::parse(eval.output.substr(eval.output.rfind('{')));
  EXPECT_NEAR(record["bleu"].get<double>(), validations[best]["valid_bleu"].get<double>(), 0.01);
  EXPECT_NEAR(record["loss"].get<double>(), validations[best]["valid_loss"].get<double>(), 1e-4);
}

TEST_F(Pipeline, EarlyStoppingCountsValidationsWithoutImprovementAcrossARestart) {
  const std::string run = file("run-patience");
  // A learning rate this small leaves the translations unchanged, so no validation improves on
  // the first (step 2): with patience 3, training stops at the fourth (step 8), even though it was
  // interrupted after the second and resumed.
  const std::string command = mpirun(2) + tool("tandem-train") + " --config " +
                              write_config("patience.yaml", run) +
                              " --set train.lr=1e-12 --set valid.every_steps=2"
                              " --set valid.patience=3 --set model.dropout=0";
  const auto first = run_command(command + " --set train.max_steps=4");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto stored = nlohmann::json::parse(checkpoint::load(run + "/last.h5").validation);
  EXPECT_EQ(stored["best_step"], 2);
  EXPECT_EQ(stored["bad_validations"], 1);
  ASSERT_EQ(stored["history"].size(), 2u);
  EXPECT_EQ(stored["history"][1]["step"], 4);

  const auto second = run_command(command + " --set train.max_steps=100");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("early stopping: 3 validations without improvement of bleu"),
            std::string::npos) << second.output;
  EXPECT_EQ(checkpoint::load(run + "/last.h5").step, 8);
  EXPECT_EQ(checkpoint::load(run + "/best.h5").step, 2);
  EXPECT_EQ(nlohmann::json::parse(checkpoint::load(run + "/last.h5").validation)["history"].size(), 4u);
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
