// TensorBoard's event files through the real tools, read by TensorBoard's own Python package
// (pinned by launch/tensorboard.sh, read by tests/e2e/tensorboard_read.py): every number of
// metrics.jsonl is a scalar with the same value at the same step, once, after a rank failure that
// the launcher restarts from an older checkpoint (the failed run's tail is written again) and a
// resume; the sample translations, the config and the restart are texts; a folder that cannot be
// made is exit 2 naming log.tensorboard_dir before training; log.tensorboard false writes none.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

class TensorBoardE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-tensorboard");
    make_reverse_corpus(dir_->path());
    const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/tensorboard.sh");
    ASSERT_EQ(install.exit_code, 0) << install.output;
    python_path_ = new std::string(lines_of(install.output).back());
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete python_path_;
  }

  static std::string run_dir(const std::string& run) { return dir_->file("run-" + run); }

  // A small model: a progress record every 5 steps, validation (2 samples) every 10, a checkpoint
  // every 20, to step 30; `log` is added to the log section.
  static std::string config(const std::string& run, const std::string& log = "") {
    const std::string path = dir_->file(run + ".yaml");
    write_file(path,
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, "
               "d_ff: 64, dropout: 0.1}\n"
               "data: {corpus: " +
                   dir_->file("corpus.h5") +
                   ", max_tokens: 256, seed: 3}\n"
                   "train: {max_steps: 30, lr: 0.003, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   run_dir(run) +
                   ", every_steps: 20}\n"
                   "valid: {every_steps: 10, max_sentences: 8, samples: 2}\n"
                   "log: {every_steps: 5" +
                   log + "}\n");
    return path;
  }

  // That config on 2 ranks; the output.
  static std::string train(const std::string& run, const std::string& flags,
                           const std::string& env = "") {
    const auto r = run_command(env + " " + tool("tandem-train") + " --config " + config(run) +
                               " --ranks 2 " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.output;
  }

  static std::vector<nlohmann::json> records(const std::string& run) {
    std::vector<nlohmann::json> out;
    for (const auto& line : lines_of(read_text(run_dir(run) + "/metrics.jsonl"))) {
      out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }

  // What TensorBoard reads in `folder`: {"scalars": {tag: [[step, value]...]}, "texts": ...}.
  static nlohmann::json tensorboard(const std::string& folder) {
    const char* python = std::getenv("PYTHON");
    const auto r =
        run_command("PYTHONPATH=" + *python_path_ + " " + (python != nullptr ? python : "python3") +
                    " " + TANDEM_TESTS_DIR + "/e2e/tensorboard_read.py " + folder);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return nlohmann::json::parse(lines_of(r.output).back());
  }

  static size_t event_files(const std::string& folder) {
    size_t count = 0;
    for (const auto& entry : fs::directory_iterator(folder)) {
      count += entry.path().filename().string().rfind("events.out.tfevents.", 0) == 0;
    }
    return count;
  }

  static TempDir* dir_;
  static std::string* python_path_;
};

TempDir* TensorBoardE2E::dir_ = nullptr;
std::string* TensorBoardE2E::python_path_ = nullptr;

// The tag a metrics.jsonl number has, as docs/monitoring.md states the rule.
std::string expected_tag(const nlohmann::json& record, const std::string& key) {
  if (record.contains("event")) return record["event"].get<std::string>() + "/" + key;
  if (record.contains("valid_loss")) {
    return "valid/" + (key.rfind("valid_", 0) == 0 ? key.substr(6) : key);
  }
  return "train/" + key;
}

TEST_F(TensorBoardE2E, EveryMetricIsAScalarOncePerStepAfterARestartAndAResume) {
  // Rank 1 fails in step 27, after the record of step 25: the launcher restarts the job from
  // step 20, which logs steps 25 and 30 again. Then a resume from step 30 goes on to 40.
  train("run", "--max-restarts 1", "TANDEM_FAULT_INJECT=rank=1,step=27,restart=0");
  train("run", "--set train.max_steps=40");

  const auto all = records("run");
  std::map<std::string, std::vector<std::pair<int64_t, double>>> expected;
  int64_t restarts = 0;
  for (const auto& record : all) {
    restarts += record.contains("event");
    for (const auto& item : record.items()) {
      if (item.key() == "step" || !item.value().is_number()) continue;
      // TensorBoard keeps a scalar as a 32-bit float.
      expected[expected_tag(record, item.key())].emplace_back(
          record["step"].get<int64_t>(), static_cast<float>(item.value().get<double>()));
    }
  }
  ASSERT_EQ(restarts, 1) << read_text(run_dir("run") + "/metrics.jsonl");
  ASSERT_EQ(expected["train/loss"].size(), 8u);  // steps 5, 10, ..., 40, once each
  ASSERT_EQ(expected["valid/bleu"].size(), 4u);  // steps 10, 20, 30, 40

  const auto board = tensorboard(run_dir("run"));
  std::set<std::string> tags;
  for (const auto& item : board["scalars"].items()) tags.insert(item.key());
  std::set<std::string> expected_tags;
  for (const auto& [tag, points] : expected) expected_tags.insert(tag);
  EXPECT_EQ(tags, expected_tags);
  for (const auto& [tag, points] : expected) {
    std::vector<std::pair<int64_t, double>> read;
    for (const auto& point : board["scalars"][tag]) {
      read.emplace_back(point[0].get<int64_t>(), point[1].get<double>());
    }
    EXPECT_EQ(read, points) << tag;  // the same steps, once each, and the same values
  }

  // Texts: the config at each start (0, the restart's 20, the resume's 30), the samples at each
  // validation, the restart at the step it resumed from.
  const auto& texts = board["texts"];
  std::vector<int64_t> config_steps;
  for (const auto& point : texts["config"]) config_steps.push_back(point[0]);
  EXPECT_EQ(config_steps, (std::vector<int64_t>{0, 20, 30}));
  EXPECT_NE(texts["config"][0][1].get<std::string>().find("every_steps: 10"), std::string::npos);
  const auto references = lines_of(read_text(dir_->file("valid.tgt")));
  std::vector<int64_t> sample_steps;
  for (const auto& point : texts["valid/samples"]) {
    sample_steps.push_back(point[0]);
    const auto rows = lines_of(point[1].get<std::string>());
    ASSERT_EQ(rows.size(), 4u) << point[1];  // header, rule, two samples
    EXPECT_EQ(rows[0], "| source | reference | translation |");
    EXPECT_NE(rows[2].find(" | " + references[0] + " | "), std::string::npos) << rows[2];
    EXPECT_NE(rows[3].find(" | " + references[1] + " | "), std::string::npos) << rows[3];
  }
  EXPECT_EQ(sample_steps, (std::vector<int64_t>{10, 20, 30, 40}));
  ASSERT_EQ(texts["restarts"].size(), 1u);
  EXPECT_EQ(texts["restarts"][0][0], 20);
  EXPECT_NE(texts["restarts"][0][1].get<std::string>().find("restart 1 at step 20: "),
            std::string::npos)
      << texts["restarts"];
}

TEST_F(TensorBoardE2E, AFolderThatCannotBeMadeIsExitTwoBeforeTrainingAndOffWritesNone) {
  const std::string blocker = dir_->file("a-file");
  write_file(blocker, "not a folder\n");
  for (const std::string& ranks : {std::string(""), std::string("--ranks 2")}) {
    const std::string run = ranks.empty() ? "bad1" : "bad2";
    const auto r =
        run_command(tool("tandem-train") + " --config " +
                    config(run, ", tensorboard_dir: " + blocker + "/board") + " " + ranks);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(
        r.output.find("log.tensorboard_dir: cannot create the folder '" + blocker + "/board'"),
        std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find("step 5"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(run_dir(run) + "/last.h5"));
  }

  const std::string off = train("off", "--set log.tensorboard=false --set train.max_steps=5");
  EXPECT_TRUE(fs::exists(run_dir("off") + "/last.h5")) << off;
  EXPECT_EQ(event_files(run_dir("off")), 0u);
}

}  // namespace
}  // namespace tandem::test
