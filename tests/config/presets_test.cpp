#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "trainer/config/config.h"

namespace tandem::config {
namespace {

const std::filesystem::path kConfigs = std::filesystem::path(TANDEM_SOURCE_DIR) / "configs";

Config load_preset(const std::string& name) { return load_config((kConfigs / name).string()); }

TEST(Presets, EveryFileInConfigsLoads) {
  int loaded = 0;
  for (const auto& entry : std::filesystem::directory_iterator(kConfigs)) {
    if (entry.path().extension() != ".yaml") continue;
    SCOPED_TRACE(entry.path().string());
    EXPECT_NO_THROW(load_config(entry.path().string()));
    ++loaded;
  }
  EXPECT_GE(loaded, 3);
}

TEST(Presets, TinyIsTheCpuPreset) {
  const Config c = load_preset("tiny.yaml");
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.model.encoder_layers, 3);
  EXPECT_EQ(c.model.decoder_layers, 3);
  EXPECT_EQ(c.model.d_ff, 1024);
  EXPECT_EQ(c.model.dropout, 0.1);
  EXPECT_EQ(c.data.max_tokens, 2048);  // the BLEU recipe of docs/recipes.md (more, smaller updates)
  EXPECT_TRUE(c.model.tie_embeddings);
  EXPECT_EQ(c.train.precision,
            Precision::kBf16);  // about 1.7x fp32 where the CPU has bf16 dot products
  // A constant rate after warm-up leaves the decaying to the moving average: docs/recipes.md's
  // recipe.
  EXPECT_EQ(c.train.schedule, Schedule::kConstant);
  EXPECT_GT(c.train.ema_decay, 0.0);
  EXPECT_EQ(c.data.corpus, "work/bible/corpus.h5");
  // Bounded by wall time, so the quickstart and a bare `tandem-train --config` both end.
  EXPECT_GT(c.train.max_minutes, 0);
  EXPECT_EQ(c.checkpoint.dir, "runs/tiny");
  EXPECT_EQ(c.checkpoint.every_steps, 400);
  EXPECT_EQ(c.checkpoint.keep_last, 3);
  EXPECT_EQ(c.log.every_steps, 20);
}

// Reads YAML lines of sections, keys and sections inside sections ("  alignment:" whose keys are
// indented 4) into full key paths: "train.alignment.weight". Returns "" for a section's line.
class KeyPaths {
 public:
  std::string path_of(const std::string& line) {
    const size_t start = line.find_first_not_of(' ');
    const std::string name = line.substr(start, line.find(':') - start);
    const std::string rest = line.substr(line.find(':') + 1);
    const size_t value = rest.find_first_not_of(' ');
    const bool header = value == std::string::npos || rest[value] == '#';  // nothing after ':'
    if (start == 0) {
      section_ = name;
      return "";
    }
    if (start == 2) {
      inner_.clear();
      if (header) {
        inner_ = name;
        return "";
      }
      return section_ + "." + name;
    }
    return section_ + "." + inner_ + "." + name;
  }

 private:
  std::string section_, inner_;
};

TEST(Presets, TinyWritesEveryKeyWithAComment) {
  std::ifstream file(kConfigs / "tiny.yaml");
  std::set<std::string> commented;
  std::string line;
  KeyPaths in_file;
  while (std::getline(file, line)) {
    if (line.empty() || line[0] == '#' || line.find_first_not_of(' ') == line.find('#')) continue;
    const std::string path = in_file.path_of(line);
    if (!path.empty() && line.find('#') != std::string::npos) commented.insert(path);
  }
  // Every key to_yaml knows appears, commented, in tiny.yaml.
  std::istringstream keys(to_yaml(load_preset("tiny.yaml")));
  int count = 0;
  KeyPaths in_yaml;
  while (std::getline(keys, line)) {
    const std::string path = in_yaml.path_of(line);
    if (path.empty()) continue;
    EXPECT_EQ(commented.count(path), 1u) << path;
    ++count;
  }
  EXPECT_EQ(count, 66);  // every key of config.h
}

TEST(Presets, BaseIsThePapersBaseModel) {
  const Config c = load_preset("base.yaml");
  EXPECT_EQ(c.model.d_model, 512);
  EXPECT_EQ(c.model.heads, 8);
  EXPECT_EQ(c.model.encoder_layers, 6);
  EXPECT_EQ(c.model.decoder_layers, 6);
  EXPECT_EQ(c.model.d_ff, 2048);
  EXPECT_EQ(c.model.dropout, 0.1);
  EXPECT_EQ(c.data.max_tokens, kAutoMaxTokens);  // fit to the GPU
  EXPECT_EQ(c.train.schedule, Schedule::kInverseSqrt);
  EXPECT_EQ(c.train.warmup_steps, 4000);
  EXPECT_EQ(c.train.lr, 7e-4);
  EXPECT_EQ(c.train.label_smoothing, 0.1);
  EXPECT_EQ(c.train.adam_beta2, 0.98);
  EXPECT_EQ(c.train.ema_decay, 0.9999);
}

TEST(Presets, BigIsThePapersBigModel) {
  const Config c = load_preset("big.yaml");
  EXPECT_EQ(c.model.d_model, 1024);
  EXPECT_EQ(c.model.heads, 16);
  EXPECT_EQ(c.model.encoder_layers, 6);
  EXPECT_EQ(c.model.decoder_layers, 6);
  EXPECT_EQ(c.model.d_ff, 4096);
  EXPECT_EQ(c.model.dropout, 0.3);
  EXPECT_EQ(c.train.schedule, Schedule::kInverseSqrt);
  EXPECT_EQ(c.train.warmup_steps, 4000);
  EXPECT_EQ(c.train.lr, 5e-4);
  EXPECT_EQ(c.train.label_smoothing, 0.1);
}

}  // namespace
}  // namespace tandem::config
