// The pipeline suites' fixture: a synthetic reverse-the-words corpus (tests/common) binarized once
// per test binary by the real tandem-prep, and the small training config every suite starts from.
// One fixture class for every file of the suite, so it is not in an anonymous namespace.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {

class Pipeline : public ::testing::Test {
 public:
  // A file of the suite's folder.
  static std::string file(const std::string& name) { return dir_->file(name); }

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

  inline static TempDir* dir_ = nullptr;
  inline static std::string* prep_output_ = nullptr;
};

}  // namespace tandem::test
