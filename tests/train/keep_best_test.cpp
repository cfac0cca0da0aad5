// Keep-best and early stopping: which validation is the best for each metric, when patience runs
// out, and that the state written into checkpoints comes back as it was.
#include "trainer/train/keep_best.h"

#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <string>

namespace tandem::train {
namespace {

config::ValidMetricChoice metric(const std::string& text) {
  return config::parse_valid_metric(text);
}

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
  KeepBest bleu(metric("bleu"), 0), chrf(metric("chrf"), 0), loss(metric("loss"), 0);
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

// Two directions whose figures move apart: the whole split's, one direction's and the mean's
// metrics each follow their own figure.
ValidationResult with_directions(double whole_bleu, double a_bleu, double b_bleu, double a_loss,
                                 double b_loss) {
  ValidationResult r = result(3.0, whole_bleu, 40.0);
  DirectionResult a, b;
  a.name = "en-es";
  a.bleu = a_bleu;
  a.loss = a_loss;
  b.name = "es-en";
  b.bleu = b_bleu;
  b.loss = b_loss;
  r.directions = {a, b};
  return r;
}

TEST(KeepBest, FollowsOneDirectionOrTheMeanOfThem) {
  KeepBest whole(metric("bleu"), 0), es_en(metric("es-en_bleu"), 0), mean(metric("mean_bleu"), 0),
      mean_loss(metric("mean_loss"), 0), en_es_loss(metric("en-es_loss"), 0);
  for (auto* keep : {&whole, &es_en, &mean, &mean_loss, &en_es_loss}) {
    EXPECT_TRUE(keep->record(100, with_directions(20.0, 20.0, 20.0, 3.0, 3.0)).improved);
  }
  // Whole BLEU up; es-en down 2, en-es up 1 (mean down 0.5); losses: en-es up 0.2, es-en down
  // 0.6 (mean down 0.2).
  const auto next = with_directions(21.0, 21.0, 18.0, 3.2, 2.4);
  EXPECT_TRUE(whole.record(200, next).improved);
  EXPECT_FALSE(es_en.record(200, next).improved);
  EXPECT_FALSE(mean.record(200, next).improved);
  EXPECT_TRUE(mean_loss.record(200, next).improved);
  EXPECT_FALSE(en_es_loss.record(200, next).improved);
  // A direction the results lack is an error naming it, not a silent zero.
  KeepBest missing(metric("fr-en_bleu"), 0);
  EXPECT_THROW(missing.record(100, next), std::invalid_argument);
  // The record names the metric as given.
  EXPECT_NE(es_en.to_json().find("\"metric\":\"es-en_bleu\""), std::string::npos);
}

TEST(KeepBest, StopsEarlyAfterPatienceValidationsWithoutImprovement) {
  KeepBest keep(metric("bleu"), 2);
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
  KeepBest keep(metric("loss"), 0);
  keep.record(1, result(1.0, 0, 0));
  for (int64_t step = 2; step < 50; ++step)
    EXPECT_FALSE(keep.record(step, result(2.0, 0, 0)).stop_early);
}

TEST(KeepBest, TheCheckpointStateRestoresTheRecordAndTheHistory) {
  KeepBest keep(metric("chrf"), 3);
  EXPECT_EQ(keep.to_json(), "");  // nothing to store before the first validation
  keep.record(10, result(6.0, 1.0, 20.0));
  keep.record(20, result(5.0, 2.0, 25.0));
  keep.record(30, result(5.5, 2.5, 24.0));
  const std::string saved = keep.to_json();
  const auto state = nlohmann::json::parse(saved);
  EXPECT_EQ(state.at("metric"), "chrf");
  ASSERT_EQ(state.at("history").size(), 3u);
  EXPECT_EQ(state.at("history")[1].at("bleu"), 2.0);

  KeepBest resumed(metric("chrf"), 3);
  resumed.restore(saved, "saved");
  EXPECT_EQ(resumed.best_step(), 20);
  EXPECT_EQ(resumed.last_step(), 30);
  EXPECT_EQ(resumed.bad_validations(), 1);
  EXPECT_EQ(resumed.to_json(), saved);
  // It goes on as the uninterrupted one does.
  EXPECT_EQ(resumed.record(40, result(5, 2, 24.5)).stop_early,
            keep.record(40, result(5, 2, 24.5)).stop_early);
  EXPECT_EQ(resumed.to_json(), keep.to_json());

  KeepBest untouched(metric("chrf"), 3);
  untouched.restore("", "nothing");
  EXPECT_EQ(untouched.to_json(), "");
}

TEST(KeepBest, AnotherMetricKeepsTheHistoryButStartsTheRecordAnew) {
  KeepBest bleu(metric("bleu"), 0);
  bleu.record(10, result(6.0, 3.0, 20.0));
  KeepBest loss(metric("loss"), 0);
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
  KeepBest keep(metric("bleu"), 2);
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
