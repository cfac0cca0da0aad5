// The progress display: the plain line's format (tests and scripts parse it), the live line's
// content, and how the live line and other log lines share the terminal without garbling.
#include "trainer/train/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "trainer/common/log.h"
#include "trainer/common/temp_dir.h"

namespace tandem::train {
namespace {

// Everything written to stderr between construction and text(), via a temporary file.
class CapturedStderr {
 public:
  CapturedStderr() : dir_("progress"), path_(dir_.file("stderr")) {
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    const int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~CapturedStderr() { restore(); }
  std::string text() {
    restore();
    std::ifstream in(path_);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
    saved_ = -1;
  }
  TempDir dir_;
  std::string path_;
  int saved_ = -1;
};

// Sets TANDEM_PROGRESS (and COLUMNS) for one test.
// One step's figures as training makes them: host counts, and device sums as CPU tensors.
StepStats step_stats(double tokens, double nll, double correct, double norm, double lr,
                     int64_t step = 1, bool skipped = false) {
  StepStats s;
  s.step = step;
  s.tgt_tokens = s.rank_tokens = tokens;
  s.lr = lr;
  s.token_sums = torch::tensor({nll, correct}, torch::kFloat64);
  s.update = torch::tensor({norm, skipped ? 1.0 : 0.0}, torch::kFloat64);
  return s;
}

class ProgressEnv : public ::testing::Test {
 protected:
  void SetUp() override { log::set_rank(0, 1); }
  void TearDown() override {
    unsetenv("TANDEM_PROGRESS");
    unsetenv("COLUMNS");
  }
  static config::Config config_with_steps(int64_t max_steps) {
    config::Config config;
    config.train.max_steps = max_steps;
    config.train.max_minutes = 0;
    config.train.max_epochs = 0;
    return config;
  }
};

TEST(ProgressRecordLine, KeepsThePlainFormatThatScriptsParse) {
  ProgressRecord r;
  r.step = 10;
  r.epoch = 0.5;
  r.loss = 2.0;
  r.perplexity = 7.389056;
  r.accuracy = 0.5;
  r.lr = 1e-3;
  r.grad_norm = 0.5;
  r.tokens_per_s = 100;
  r.elapsed_s = 61;
  r.eta_s = 9;
  EXPECT_EQ(r.line(),
            "step 10 | epoch 0.50 | loss 2.0000 | ppl 7.39 | acc 50.0% | lr 1.000e-03 | gnorm 0.500"
            " | 100 tok/s | 1m01s | ETA 0m09s");
  r.eta_s = -1;
  EXPECT_EQ(r.line().find("ETA"), std::string::npos);
}

LiveView sample_view() {
  LiveView v;
  v.step = 120;
  v.max_steps = 480;
  v.epoch = 1.3251;
  v.loss = 3.21434;
  v.lr = 3e-4;
  v.tokens_per_s = 5321.4;
  v.fraction = 0.25;  // 3 of 12 cells
  v.eta_s = 3725;
  return v;
}

TEST(LiveViewLine, ShowsABarAndEtaWhenALimitGivesAnEnd) {
  EXPECT_EQ(sample_view().line(),
            "step 120/480 [###---------]  25% | ETA 1h02m05s | loss 3.2143 | 5321 tok/s"
            " | epoch 1.33 | lr 3.00e-04");
}

TEST(LiveViewLine, LeavesOutWholeFieldsThatPassTheWidth) {
  const std::string upto_loss = "step 120/480 [###---------]  25% | ETA 1h02m05s | loss 3.2143";
  EXPECT_EQ(sample_view().line(upto_loss.size()), upto_loss);
  EXPECT_EQ(sample_view().line(upto_loss.size() + 5), upto_loss);  // " | 5321 tok/s" does not fit
}

TEST(LiveViewLine, ShowsNoBarAndNoEtaWithoutALimit) {
  LiveView v;
  v.step = 7;
  v.epoch = 0.5;
  v.loss = 1.5;
  v.lr = 1e-3;
  v.tokens_per_s = 10;
  EXPECT_EQ(v.line(), "step 7 | loss 1.5000 | 10 tok/s | epoch 0.50 | lr 1.00e-03");
}

TEST_F(ProgressEnv, LiveViewAveragesTheCurrentWindowAndCountsStepsTowardsTheLimit) {
  ProgressMeter meter(config_with_steps(40), 0);
  // Two steps: 30 + 10 target tokens with NLL sums 60 and 40 → 100 / 40 = 2.5 nats per token.
  meter.add(step_stats(30, 60, 0, 1.0, 2e-3));
  meter.add(step_stats(10, 40, 0, 1.0, 1e-3));
  const LiveView v = meter.view(10, 0.25);
  EXPECT_DOUBLE_EQ(v.loss, 2.5);
  EXPECT_DOUBLE_EQ(v.lr, 1e-3);  // the latest step's
  EXPECT_DOUBLE_EQ(v.fraction, 10.0 / 40.0);
  EXPECT_EQ(v.max_steps, 40);
  EXPECT_GE(v.eta_s, 0.0);
  // After a record, the empty new window shows the record's figures until a step arrives.
  const ProgressRecord r = meter.take(10, 0.25);
  EXPECT_DOUBLE_EQ(meter.view(10, 0.25).loss, r.loss);
  meter.add(step_stats(20, 20, 0, 1.0, 1e-3));
  EXPECT_DOUBLE_EQ(meter.view(11, 0.3).loss, 1.0);
}

// A window's record: the loss figures summed over ranks by the meter's collective (here a double
// standing in for a second rank that saw the same), the norm averaged over steps, skipped updates
// counted with the last one's step.
TEST_F(ProgressEnv, ARecordSumsTheRanksLossFiguresAndCountsSkippedUpdates) {
  int collectives = 0;
  ProgressMeter meter(config_with_steps(40), 0, [&](torch::Tensor& t) {
    ++collectives;
    t.mul_(2);
  });
  // Global counts 80 and 40 tokens; this rank's NLL sums 50 and 10, correct 20 and 10.
  meter.add(step_stats(80, 50, 20, 3.0, 1e-3, 11));
  meter.add(step_stats(40, 10, 10, 1.0, 1e-3, 12, /*skipped=*/true));
  meter.add(step_stats(0, 0, 0, 2.0, 1e-3, 13, /*skipped=*/true));
  const ProgressRecord r = meter.take(13, 0.5);
  EXPECT_EQ(collectives, 1);
  EXPECT_DOUBLE_EQ(r.loss, 2 * 60.0 / 120.0);
  EXPECT_DOUBLE_EQ(r.accuracy, 2 * 30.0 / 120.0);
  EXPECT_DOUBLE_EQ(r.grad_norm, 2.0);  // not summed over ranks: every rank has the same norm
  EXPECT_EQ(r.skipped, 2);
  EXPECT_EQ(r.last_skipped, 13);
  EXPECT_EQ(r.json()["skipped_updates"], 2);
  // The next window starts empty; a NaN norm makes its mean NaN (null in JSON). Its skip is
  // there to report before any record (as training does when it ends between log steps).
  EXPECT_EQ(meter.unreported_skips().count, 0);
  meter.add(step_stats(10, 10, 5, NAN, 1e-3, 14, true));
  EXPECT_EQ(meter.unreported_skips().count, 1);
  EXPECT_EQ(meter.unreported_skips().last, 14);
  const ProgressRecord next = meter.take(14, 0.6);
  EXPECT_EQ(next.skipped, 1);
  EXPECT_EQ(next.last_skipped, 14);
  EXPECT_TRUE(std::isnan(next.grad_norm));
  EXPECT_NE(next.json().dump().find("\"grad_norm\":null"), std::string::npos);
  EXPECT_DOUBLE_EQ(next.loss, 2.0);
}

// Several corpora: each one's sums travel in the same collective as the totals, and the record
// gives each its loss, accuracy and token count, in the line and in the JSON.
TEST_F(ProgressEnv, ARecordGivesEachCorpusItsLossSummedOverRanks) {
  int collectives = 0;
  ProgressMeter meter(config_with_steps(40), 0,
                      [&](torch::Tensor& t) {
                        ++collectives;
                        t.mul_(2);  // a second rank that saw the same
                      },
                      {"en-es", "es-en"});
  // Per corpus [nll, targets, correct]; the totals are their sums.
  StepStats first = step_stats(2 * 50, 30 + 40, 10 + 20, 1.0, 1e-3, 1);
  first.direction_sums = torch::tensor({{30.0, 20.0, 10.0}, {40.0, 30.0, 20.0}}, torch::kFloat64);
  StepStats second = step_stats(2 * 30, 90, 0, 1.0, 1e-3, 2);
  second.direction_sums = torch::tensor({{90.0, 30.0, 0.0}, {0.0, 0.0, 0.0}}, torch::kFloat64);
  meter.add(first);
  meter.add(second);
  const ProgressRecord r = meter.take(2, 0.1);
  EXPECT_EQ(collectives, 1);
  ASSERT_EQ(r.directions.size(), 2u);
  EXPECT_EQ(r.directions[0].name, "en-es");
  EXPECT_DOUBLE_EQ(r.directions[0].loss, (30.0 + 90.0) / (20.0 + 30.0));
  EXPECT_DOUBLE_EQ(r.directions[0].accuracy, 10.0 / 50.0);
  EXPECT_DOUBLE_EQ(r.directions[0].tokens, 2 * 50.0);
  EXPECT_DOUBLE_EQ(r.directions[1].loss, 40.0 / 30.0);
  EXPECT_DOUBLE_EQ(r.directions[1].tokens, 2 * 30.0);
  EXPECT_DOUBLE_EQ(r.loss, 2 * 160.0 / 160.0);
  const std::string line = r.line();
  EXPECT_NE(line.find(" | by corpus: en-es 2.4000, es-en 1.3333"), std::string::npos) << line;
  const auto json = r.json();
  EXPECT_DOUBLE_EQ(json["loss_en-es"].get<double>(), 2.4);
  EXPECT_DOUBLE_EQ(json["accuracy_es-en"].get<double>(), 20.0 / 30.0);
  EXPECT_DOUBLE_EQ(json["tgt_tokens_es-en"].get<double>(), 60.0);
  // A window without any of a corpus's targets gives it 0, not NaN.
  StepStats third = step_stats(10, 5, 1, 1.0, 1e-3, 3);
  third.direction_sums = torch::tensor({{5.0, 5.0, 1.0}, {0.0, 0.0, 0.0}}, torch::kFloat64);
  meter.add(third);
  const ProgressRecord next = meter.take(3, 0.2);
  EXPECT_DOUBLE_EQ(next.directions[1].loss, 0.0);
  EXPECT_DOUBLE_EQ(next.directions[0].loss, 1.0);
}

TEST_F(ProgressEnv, EpochLimitAloneGivesTheFraction) {
  config::Config config = config_with_steps(0);
  config.train.max_epochs = 4;
  ProgressMeter meter(config, 0);
  EXPECT_DOUBLE_EQ(meter.view(3, 1.0).fraction, 0.25);
  EXPECT_EQ(meter.view(3, 1.0).max_steps, 0);
  EXPECT_DOUBLE_EQ(ProgressMeter(config_with_steps(0), 0).view(3, 1.0).fraction, -1);
}

TEST_F(ProgressEnv, PlainModeDrawsNothingBesideTheLogLines) {
  setenv("TANDEM_PROGRESS", "plain", 1);
  CapturedStderr captured;
  {
    ProgressMeter meter(config_with_steps(10), 0);
    meter.add(step_stats(10, 10, 5, 1.0, 1e-3));
    meter.show(1, 0.1);
    log::info("saved x.h5");
  }
  EXPECT_EQ(captured.text(), "[tandem] saved x.h5\n");
}

TEST_F(ProgressEnv, BarModeErasesTheLiveLineBeforeALogLineAndRedrawsItBelow) {
  setenv("TANDEM_PROGRESS", "bar", 1);
  setenv("COLUMNS", "30", 1);  // stderr is a file here: the width comes from COLUMNS
  CapturedStderr captured;
  std::string live;
  {
    ProgressMeter meter(config_with_steps(10), 0);
    meter.add(step_stats(10, 10, 5, 1.0, 1e-3));
    meter.show(1, 0.1);
    live = meter.view(1, 0.1).line(29);  // one column spare
    ASSERT_EQ(live, "step 1/10 [#-----------]  10%");
    log::info("saved x.h5");
    meter.summary(1, 0.1);  // ends the live line
    log::info("done");
  }
  const std::string erase = "\r\033[K";
  EXPECT_EQ(captured.text(),
            erase + live + erase + "[tandem] saved x.h5\n" + live + erase + "[tandem] done\n");
}

TEST_F(ProgressEnv, OtherRanksNeverDrawTheLiveLine) {
  setenv("TANDEM_PROGRESS", "bar", 1);
  log::set_rank(1, 2);
  CapturedStderr captured;
  {
    ProgressMeter meter(config_with_steps(10), 0);
    meter.add(step_stats(10, 10, 5, 1.0, 1e-3));
    meter.show(1, 0.1);
  }
  log::set_rank(0, 1);
  EXPECT_EQ(captured.text(), "");
}

TEST_F(ProgressEnv, AnUnknownModeIsAnErrorNamingTheVariable) {
  setenv("TANDEM_PROGRESS", "fancy", 1);
  try {
    ProgressMeter meter(config_with_steps(10), 0);
    FAIL() << "no exception";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("TANDEM_PROGRESS='fancy'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::train
