// Keep-best and early stopping: which validation is the best for each metric, when patience runs
// out, and that the state written into checkpoints comes back as it was.
#include "trainer/train/keep_best.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace tandem::train {
namespace {

ValidationResult result(double loss, double bleu, double chrf) {
  ValidationResult r;
  r.loss = loss;
  r.perplexity = std::exp(loss);
  r.accuracy = 0.5;
  r.bleu = bleu;
  r.chrf = chrf;
  return r;
}

TEST(KeepBest, BleuAndChrfImproveUpwardsAndLossDownwards) {
  KeepBest bleu(config::ValidMetric::kBleu, 0), chrf(config::ValidMetric::kChrf, 0),
      loss(config::ValidMetric::kLoss, 0);
  for (auto* keep : {&bleu, &chrf, &loss}) {
    EXPECT_EQ(keep->best_step(), -1);
    EXPECT_TRUE(keep->record(100, result(5.0, 10.0, 30.0)).improved);  // the first is the best
  }
  // Lower loss, lower BLEU, higher chrF.
  EXPECT_FALSE(bleu.record(200, result(4.0, 9.0, 31.0)).improved);
  EXPECT_TRUE(chrf.record(200, result(4.0, 9.0, 31.0)).improved);
  EXPECT_TRUE(loss.record(200, result(4.0, 9.0, 31.0)).improved);
  EXPECT_EQ(bleu.best_step(), 100);
  EXPECT_EQ(chrf.best_step(), 200);
  EXPECT_EQ(loss.best_step(), 200);
  EXPECT_EQ(bleu.last_step(), 200);
  // Equal is not better.
  EXPECT_FALSE(loss.record(300, result(4.0, 9.0, 31.0)).improved);
  EXPECT_EQ(loss.best_step(), 200);
}

TEST(KeepBest, StopsEarlyAfterPatienceValidationsWithoutImprovement) {
  KeepBest keep(config::ValidMetric::kBleu, 2);
  EXPECT_FALSE(keep.record(1, result(5, 10, 0)).stop_early);
  EXPECT_FALSE(keep.record(2, result(5, 9, 0)).stop_early);
  EXPECT_EQ(keep.bad_validations(), 1);
  EXPECT_FALSE(keep.record(3, result(5, 11, 0)).stop_early);  // an improvement resets the count
  EXPECT_EQ(keep.bad_validations(), 0);
  EXPECT_FALSE(keep.record(4, result(5, 11, 0)).stop_early);
  const auto verdict = keep.record(5, result(5, 10.5, 0));
  EXPECT_TRUE(verdict.stop_early);
  EXPECT_FALSE(verdict.improved);
  EXPECT_TRUE(keep.stop_early());
  EXPECT_EQ(keep.best_step(), 3);
}

TEST(KeepBest, PatienceZeroNeverStops) {
  KeepBest keep(config::ValidMetric::kLoss, 0);
  keep.record(1, result(1.0, 0, 0));
  for (int64_t step = 2; step < 50; ++step)
    EXPECT_FALSE(keep.record(step, result(2.0, 0, 0)).stop_early);
}

TEST(KeepBest, TheCheckpointStateRestoresTheRecordAndTheHistory) {
  KeepBest keep(config::ValidMetric::kChrf, 3);
  EXPECT_EQ(keep.to_json(), "");  // nothing to store before the first validation
  keep.record(10, result(6.0, 1.0, 20.0));
  keep.record(20, result(5.0, 2.0, 25.0));
  keep.record(30, result(5.5, 2.5, 24.0));
  const std::string saved = keep.to_json();
  const auto state = nlohmann::json::parse(saved);
  EXPECT_EQ(state.at("metric"), "chrf");
  ASSERT_EQ(state.at("history").size(), 3u);
  EXPECT_EQ(state.at("history")[1].at("bleu"), 2.0);

  KeepBest resumed(config::ValidMetric::kChrf, 3);
  resumed.restore(saved, "saved");
  EXPECT_EQ(resumed.best_step(), 20);
  EXPECT_EQ(resumed.last_step(), 30);
  EXPECT_EQ(resumed.bad_validations(), 1);
  EXPECT_EQ(resumed.to_json(), saved);
  // It goes on as the uninterrupted one does.
  EXPECT_EQ(resumed.record(40, result(5, 2, 24.5)).stop_early,
            keep.record(40, result(5, 2, 24.5)).stop_early);
  EXPECT_EQ(resumed.to_json(), keep.to_json());

  KeepBest untouched(config::ValidMetric::kChrf, 3);
  untouched.restore("", "nothing");
  EXPECT_EQ(untouched.to_json(), "");
}

TEST(KeepBest, AnotherMetricKeepsTheHistoryButStartsTheRecordAnew) {
  KeepBest bleu(config::ValidMetric::kBleu, 0);
  bleu.record(10, result(6.0, 3.0, 20.0));
  KeepBest loss(config::ValidMetric::kLoss, 0);
  loss.restore(bleu.to_json(), "bleu's");
  EXPECT_EQ(loss.best_step(), -1);
  EXPECT_EQ(loss.last_step(), 10);
  // The first validation under the new metric is its best.
  EXPECT_TRUE(loss.record(20, result(7.0, 1.0, 10.0)).improved);
  EXPECT_EQ(nlohmann::json::parse(loss.to_json()).at("history").size(), 2u);
}

// A damaged or hand-edited checkpoint's /validation (found by tests/fuzz/checkpoint_fuzz.cpp: it
// escaped as nlohmann's own exception, which names neither the file nor the dataset).
TEST(KeepBest, RefusesARecordThatIsNotItsOwnNamingTheSourceAndKeepsItsState) {
  KeepBest keep(config::ValidMetric::kBleu, 2);
  keep.record(10, result(6.0, 3.0, 20.0));
  const std::string before = keep.to_json();
  auto without_last_step = nlohmann::json::parse(before);
  without_last_step.erase("last_step");
  auto string_step = nlohmann::json::parse(before);
  string_step["best_step"] = "ten";
  auto history_object = nlohmann::json::parse(before);
  history_object["history"] = nlohmann::json::object();
  for (const std::string& bad : {std::string("{not json"), without_last_step.dump(),
                                 string_step.dump(), history_object.dump(), std::string("[]")}) {
    try {
      keep.restore(bad, "checkpoint 'x.h5' /validation");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("checkpoint 'x.h5' /validation is not the keep-best "
                                            "record Tandem writes: ", 0),
                0u)
          << e.what();
    }
    EXPECT_EQ(keep.to_json(), before);
  }
}

}  // namespace
}  // namespace tandem::train
