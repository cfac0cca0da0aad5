// Validation through the real tools: the best checkpoint kept agrees with tandem-eval, and early
// stopping counts validations without improvement across a restart.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/e2e/pipeline_fixture.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

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

}  // namespace
}  // namespace tandem::test
