// tandem-bench through the real binary on a synthetic corpus: the figures of its JSON line under
// mpirun and in-process, its FLOPs count against a sentence-by-sentence recount, the yardstick's
// plumbing with a stand-in script, and one-line usage errors before anything is measured.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "data/corpus/corpus.h"
#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

// A small model, a few short steps.
constexpr const char* kSmall =
    " --warmup 1 --steps 2 --windows 3 --set model.d_model=32 --set model.heads=2"
    " --set model.encoder_layers=1 --set model.decoder_layers=1 --set model.d_ff=64"
    " --set data.max_tokens=256";

// Stands in for ref_train.py: checks what it was given and prints, from rank 0, a JSON line with
// fixed figures and the settings it saw.
constexpr const char* kFakeYardstick = R"(
[ "${OMPI_COMM_WORLD_RANK:-0}" = 0 ] || exit 0
[ -s "$1/train.en" ] && [ -s "$1/train.es" ] && [ -s "$2" ] || { echo "fake: missing inputs" >&2; exit 1; }
echo "{\"tgt_tokens_per_s\": 100.0, \"rank0_peak_rss_mb\": 1000, \"world\": ${OMPI_COMM_WORLD_SIZE:-1},\
 \"threads\": $REF_THREADS, \"blas_threads\": $OPENBLAS_NUM_THREADS, \"tokens\": $REF_TOKENS,\
 \"vocab\": $REF_VOCAB, \"shape\": \"$REF_SHAPE\", \"steps\": $3, \"lines\": $(wc -l < "$1/train.es")}"
)";

class Bench : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("bench");
    corpus_ = new std::string(make_reverse_corpus(dir_->path()));
    write_file(dir_->file("fake_ref_train.sh"), kFakeYardstick);
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete corpus_;
  }
  static std::string bench(const std::string& flags) {
    return tool("tandem-bench") + " --corpus " + *corpus_ + " " + flags;
  }
  static std::string fake_yardstick() {
    return " --pytorch --pytorch-python /bin/sh --pytorch-script " +
           dir_->file("fake_ref_train.sh");
  }

  static TempDir* dir_;
  static std::string* corpus_;
};
TempDir* Bench::dir_ = nullptr;
std::string* Bench::corpus_ = nullptr;

// Model FLOPs per target token recounted pair by pair for a 1+1 layer model: every matrix product
// of a training step in multiply-adds, x2 FLOPs, x3 for forward and backward.
double recount_flops(const std::string& corpus_path, double d, double dff) {
  data::Corpus corpus(corpus_path);
  const double vocab = static_cast<double>(corpus.vocab().size());
  const auto src = corpus.src_lengths("train");
  const auto tgt = corpus.tgt_lengths("train");
  double macs = 0, targets = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    const double ls = src[i] + 1.0, lt = tgt[i] + 1.0;  // with EOS / BOS
    const double encoder = ls * (4 * d * d + 2 * d * dff) + 2 * ls * ls * d;
    const double self_attention = lt * 4 * d * d + 2 * lt * lt * d;
    const double cross_attention = lt * 2 * d * d + ls * 2 * d * d + 2 * lt * ls * d;
    macs += encoder + self_attention + cross_attention + lt * 2 * d * dff + lt * d * vocab;
    targets += lt;
  }
  return 6 * macs / targets;
}

TEST_F(Bench, TwoRanksUnderMpirunReportTheMedianWindowFlopsAndRssOfEachRank) {
  const auto run = run_command(bench("--ranks 2 --threads 1" + std::string(kSmall)));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("--bind-to"), std::string::npos) << run.output;
  const auto j = last_json_line(run.output);
  EXPECT_EQ(j.at("ranks"), 2);
  EXPECT_EQ(j.at("threads"), 1);
  EXPECT_EQ(j.at("steps"), 2);
  EXPECT_EQ(j.at("windows"), 3);
  EXPECT_GT(j.at("tgt_tokens_per_s").get<double>(), 0);
  EXPECT_GT(j.at("peak_rss_mb").get<double>(), 0);
  auto windows = j.at("window_tokens_per_s").get<std::vector<double>>();
  ASSERT_EQ(windows.size(), 3u);
  std::sort(windows.begin(), windows.end());
  EXPECT_DOUBLE_EQ(j.at("tgt_tokens_per_s").get<double>(), windows[1]);
  const auto rss = j.at("peak_rss_mb_per_rank").get<std::vector<double>>();
  ASSERT_EQ(rss.size(), 2u);
  EXPECT_DOUBLE_EQ(j.at("peak_rss_mb").get<double>(), std::max(rss[0], rss[1]));
  const double flops = j.at("flops_per_token").get<double>();
  EXPECT_NEAR(flops, recount_flops(*corpus_, 32, 64), 1e-9 * flops);
  EXPECT_NEAR(j.at("achieved_gflops").get<double>(), flops * windows[1] / 1e9, 1e-9 * flops);
}

TEST_F(Bench, OneRankRunsInProcessAndHandsTheYardstickTheSameWork) {
  // The tiny shape (the yardstick knows no other small one) on a small token budget.
  const auto run =
      run_command(bench("--ranks 1 --threads 1 --warmup 0 --steps 1 --windows 1"
                        " --set data.max_tokens=128" +
                        fake_yardstick()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("in this process"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("re-encoding"), std::string::npos) << run.output;
  const auto j = last_json_line(run.output);
  const auto& seen = j.at("pytorch");
  data::Corpus corpus(*corpus_);
  EXPECT_EQ(seen.at("lines"), corpus.size("train"));  // the whole train split, exported
  EXPECT_EQ(seen.at("vocab"), corpus.vocab().size());
  EXPECT_EQ(seen.at("shape"), "tiny");
  EXPECT_EQ(seen.at("tokens"), 128);
  EXPECT_EQ(seen.at("threads"), 1);
  EXPECT_EQ(seen.at("steps"), 1);
  EXPECT_EQ(seen.at("world"), 1);
  const double rate = j.at("tgt_tokens_per_s"), rss = j.at("peak_rss_mb");
  EXPECT_DOUBLE_EQ(j.at("tokens_per_s_ratio").get<double>(), rate / 100.0);
  EXPECT_DOUBLE_EQ(j.at("peak_rss_ratio").get<double>(), rss / 1000.0);
}

TEST_F(Bench, TheYardstickRunsUnderMpirunWithItsSettingsOnEveryRank) {
  const auto run =
      run_command(bench("--ranks 2 --threads 1 --warmup 0 --steps 2 --windows 2"
                        " --set data.max_tokens=128" +
                        fake_yardstick()));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  const auto seen = last_json_line(run.output).at("pytorch");
  EXPECT_EQ(seen.at("world"), 2);
  EXPECT_EQ(seen.at("threads"), 1);
  EXPECT_EQ(seen.at("blas_threads"), 1);
  EXPECT_EQ(seen.at("steps"), 4);  // as many timed steps as Tandem's windows
}

// Bad input ends with exit code 2 and one line naming what is wrong, before anything runs.
TEST_F(Bench, BadInputIsOneLineAndExitCodeTwo) {
  const std::pair<std::string, std::string> cases[] = {
      {tool("tandem-bench") + " --corpus " + dir_->file("missing.h5"), "missing.h5"},
      {bench("--ranks 0"), "--ranks"},
      {bench("--no-such-flag"), "--no-such-flag"},
      {bench("--set checkpoint.dir=elsewhere"), "checkpoint.dir"},
      {bench("--set model.d_model=32 --pytorch --pytorch-script " + dir_->file("none.py")),
       "--pytorch-script"},
      {bench("--set model.d_model=32" + fake_yardstick()), "tiny"},
  };
  for (const auto& [command, named] : cases) {
    const auto run = run_command(command);
    EXPECT_EQ(run.exit_code, 2) << command << "\n" << run.output;
    EXPECT_EQ(std::count(run.output.begin(), run.output.end(), '\n'), 1) << run.output;
    EXPECT_NE(run.output.find(named), std::string::npos) << run.output;
  }
}

}  // namespace
}  // namespace tandem::test
