// The whole pipeline through the real tools: tandem-prep → mpirun tandem-train → checkpoints and
// resume → tandem-eval → tandem-decode, on a synthetic reverse-the-words corpus.
// Checkpoints across restarts and world sizes: pipeline_resume_test.cpp; fine-tuning:
// pipeline_fine_tune_test.cpp; validation: pipeline_validation_test.cpp.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "data/corpus/corpus.h"
#include "tests/e2e/pipeline_fixture.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

// Whether `--device auto` would take a GPU here.
bool gpu_visible() { return torch::cuda::is_available(); }

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

// A line longer than the position table is cut with a warning; the other lines still translate,
// the short one as it does alone (the long one neither breaks nor shifts it).
void expect_a_line_too_long_is_cut_alone(const std::string& checkpoint) {
  const std::string decode = tool("tandem-decode") + " --checkpoint " + checkpoint + " < ";
  std::string long_line = "red";
  for (int i = 0; i < 200; ++i) long_line += " green";
  write_file(Pipeline::file("long.src"), long_line + "\nred blue\n");
  const auto cut = run_command(decode + Pipeline::file("long.src"));
  EXPECT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("1 sentence(s) longer than 127 tokens were truncated"),
            std::string::npos)
      << cut.output;
  write_file(Pipeline::file("short.src"), "red blue\n");
  const auto alone = run_command(decode + Pipeline::file("short.src") + " 2>/dev/null");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  ASSERT_FALSE(alone.output.empty());
  EXPECT_NE(cut.output.find("\n" + alone.output), std::string::npos) << cut.output;
}

// Beam 4 over mixed lengths in small batches and chunks: each output line is its input line's
// translation alone, in input order (batches are cut from length-sorted sentences).
void expect_each_line_translates_as_alone(const std::string& checkpoint) {
  std::ifstream test_src(Pipeline::file("test.src"));
  std::vector<std::string> mixed;
  for (std::string line; mixed.size() < 12 && std::getline(test_src, line);) mixed.push_back(line);
  std::stable_sort(mixed.begin(), mixed.end(),
                   [](const std::string& a, const std::string& b) { return a.size() < b.size(); });
  for (size_t i = 1; i < mixed.size(); i += 2) std::swap(mixed[i], mixed[mixed.size() - i]);
  std::string mixed_text;
  for (const auto& line : mixed) mixed_text += line + "\n";
  write_file(Pipeline::file("mixed.src"), mixed_text);
  const std::string beam4 = tool("tandem-decode") + " --checkpoint " + checkpoint + " --beam 4";
  const auto batched = run_command(beam4 + " --batch-tokens 40 --chunk-lines 5 < " +
                                   Pipeline::file("mixed.src") + " 2>/dev/null");
  ASSERT_EQ(batched.exit_code, 0) << batched.output;
  std::string one_by_one;
  for (size_t i = 0; i < mixed.size(); ++i) {
    write_file(Pipeline::file("one.src"), mixed[i] + "\n");
    const auto one = run_command(beam4 + " < " + Pipeline::file("one.src") + " 2>/dev/null");
    ASSERT_EQ(one.exit_code, 0) << one.output;
    one_by_one += one.output;
  }
  EXPECT_EQ(batched.output, one_by_one);
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

  expect_a_line_too_long_is_cut_alone(run + "/last.h5");
  expect_each_line_translates_as_alone(run + "/last.h5");

  const auto rescored = run_command(tool("tandem-eval") + " --hyp " + file("test.hyp") + " --ref " +
                                    file("test.tgt") + " --json");
  ASSERT_EQ(rescored.exit_code, 0) << rescored.output;
  const auto again = nlohmann::json::parse(rescored.output.substr(rescored.output.rfind('{')));
  EXPECT_NEAR(again["bleu"].get<double>(), record["bleu"].get<double>(), 1e-9);
}

// Sampling: a line's draws depend on the seed and its index alone, so chunks of 3 lines on two
// threads give the bytes one chunk on one thread gives; another seed gives other lines.
void expect_sampled_lines_depend_on_the_seed_alone(const std::string& last,
                                                   const std::string& input) {
  const std::string sample =
      tool("tandem-decode") + " --sampling topk:5 --checkpoint " + last + " --temperature 1.2";
  const auto seeded = run_command(sample + " --seed 4 --threads 1" + input);
  const auto chunked = run_command(sample + " --seed 4 --threads 2 --chunk-lines 3" + input);
  const auto reseeded = run_command(sample + " --seed 5 --threads 1" + input);
  ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
  EXPECT_EQ(chunked.output, seeded.output);
  EXPECT_NE(reseeded.output, seeded.output);
  EXPECT_EQ(lines_of(seeded.output).size(), lines_of(read_text(Pipeline::file("test.src"))).size());
}

// int8: the same number of lines, most of them the same translation (scores differ a little).
void expect_int8_mostly_the_same(const std::string& int8_decode, const std::string& fp32_lines) {
  const auto int8 = run_command(int8_decode);
  ASSERT_EQ(int8.exit_code, 0) << int8.output;
  std::istringstream float_lines(fp32_lines), int8_lines(int8.output);
  int lines = 0, same = 0;
  for (std::string a, b; std::getline(float_lines, a);) {
    ASSERT_TRUE(std::getline(int8_lines, b)) << "int8 wrote fewer lines";
    ++lines;
    same += a.substr(0, a.rfind(" ||| ")) == b.substr(0, b.rfind(" ||| "));
  }
  EXPECT_GE(same, lines / 2) << same << " of " << lines << " n-best lines unchanged in int8";
}

// Two checkpoints of the run: scored by the normalised weighted geometric mean of their
// distributions, whose loss is at most the weighted mean of theirs (Hoelder's inequality).
void expect_the_ensembles_loss_bounded(const std::string& last, const std::string& earlier) {
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
}

// A checkpoint of another vocabulary, or a weight too many, is refused on one line (exit 2).
void expect_a_foreign_vocabulary_and_a_weight_too_many_refused(const std::string& cfg,
                                                               const std::string& last) {
  const auto prep = run_command(
      tool("tandem-prep") + " --train-src " + Pipeline::file("valid.src") + " --train-tgt " +
      Pipeline::file("valid.tgt") + " --vocab-size 30 --out " + Pipeline::file("other-vocab.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const std::string other_run = Pipeline::file("run-other-vocab");
  ASSERT_EQ(run_command(tool("tandem-train") + " --config " + cfg +
                        " --set data.corpus=" + Pipeline::file("other-vocab.h5") +
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
  expect_sampled_lines_depend_on_the_seed_alone(last, input);

  // --device cpu is the default; auto is the CPU where no GPU is visible (as in CI).
  for (const std::string device : {"cpu", "auto"}) {
    const auto placed =
        run_command(decode + " --device " + device + " --checkpoint " + last + input);
    ASSERT_EQ(placed.exit_code, 0) << placed.output;
    if (device == "cpu" || !gpu_visible()) {
      EXPECT_EQ(placed.output, alone.output) << device;
    }
  }
  expect_int8_mostly_the_same(decode + " --precision int8 --checkpoint " + last + input,
                              alone.output);
  expect_the_ensembles_loss_bounded(last, earlier);
  expect_a_foreign_vocabulary_and_a_weight_too_many_refused(cfg, last);
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

}  // namespace
}  // namespace tandem::test
