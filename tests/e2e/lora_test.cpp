// LoRA (lora.* settings) against Hugging Face peft (its pinned Python package from
// launch/transformers.sh): a small NLLB-layout model with random weights (m2m100_reference.py),
// imported as the base; Tandem and peft (lora_reference.py) train the same adapters, from the same
// initial values, on the same batches (every step the whole train split: one batch on 1 rank, two
// on 2), with Adam and dropout 0; each step's loss agrees within 1e-5 relative. Then the adapter
// checkpoint decodes as its merge does (tandem-export --to tandem) and as CTranslate2 does on
// its export, an adapter set with one misshapen matrix is refused, and bad input is refused with
// exit code 2, nothing written. A base held in int8 trains
// as peft does on the weights its int8 stands for.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/batching/batch_plan.h"
#include "data/corpus/corpus.h"
#include "tests/e2e/bible_text.h"
#include "tests/e2e/import_checks.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kSteps = 20;
constexpr int kPairs = 24;
constexpr const char* kLanguages = " --source-lang eng_Latn --target-lang spa_Latn";

const BibleText& bible_text() {
  static const BibleText text("lora-bible");
  return text;
}
std::string dir() { return bible_text().file("lora"); }
std::string base() { return dir() + "/base.h5"; }
std::string corpus() { return dir() + "/corpus.h5"; }

std::string python() {
  const char* python = std::getenv("PYTHON");
  return python != nullptr ? python : "python3";
}

// The PYTHONPATH of launch/transformers.sh (transformers, peft, PyTorch).
std::string transformers_path() {
  static const std::string path = [] {
    const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/transformers.sh");
    EXPECT_EQ(install.exit_code, 0) << install.output;
    return install.exit_code == 0 ? lines_of(install.output).back() : std::string();
  }();
  return path;
}

// The reference model, imported as the base; the train pairs (at most 12 words a side) as a
// corpus of the model's vocabulary. False (with the failure reported) if a step fails.
bool prepare() {
  static const bool done = [] {
    const BibleText& bible = bible_text();
    fs::create_directories(dir());
    if (transformers_path().empty()) return false;
    const auto r =
        run_command("LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib PYTHONPATH=" +
                    transformers_path() + " " + python() + " -S " + TANDEM_TESTS_DIR +
                    "/e2e/m2m100_reference.py " + dir() + "/ref nllb " + bible.file("text.txt") +
                    " " + bible.file("test.src") + " " + bible.file("test.tgt") +
                    " eng_Latn spa_Latn " + bible.file("raw.txt") + " 20");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.exit_code != 0) return false;
    const auto imported =
        run_command(tool("tandem-import") + " --from " + dir() + "/ref/model --out " + base());
    EXPECT_EQ(imported.exit_code, 0) << imported.output;
    if (imported.exit_code != 0) return false;
    const auto en = lines_of(read_text(bible.file("bible/train.en")));
    const auto es = lines_of(read_text(bible.file("bible/train.es")));
    const auto words = [](const std::string& line) {
      return std::count(line.begin(), line.end(), ' ') + 1;
    };
    std::string src, tgt;
    for (size_t i = 0, n = 0; i < en.size() && n < kPairs; ++i) {
      if (words(en[i]) > 12 || words(es[i]) > 12) continue;
      src += en[i] + "\n";
      tgt += es[i] + "\n";
      ++n;
    }
    write_file(dir() + "/train.en", src);
    write_file(dir() + "/train.es", tgt);
    const auto prep =
        run_command(tool("tandem-prep") + " --vocab-from " + base() +
                    " --src-lang eng_Latn --tgt-lang spa_Latn --train-src " + dir() +
                    "/train.en --train-tgt " + dir() + "/train.es --valid-src " + dir() +
                    "/train.en --valid-tgt " + dir() + "/train.es --out " + corpus());
    EXPECT_EQ(prep.exit_code, 0) << prep.output;
    return prep.exit_code == 0;
  }();
  return done;
}

// A LoRA run on the base: the imported model's shape, dropout 0, rank 4 on the attention
// projections, Adam without clipping; every step one global batch of all the train pairs (the
// longest padded pair times the pairs per rank).
config::Config lora_config(const std::string& run, int ranks) {
  config::Config c = config::parse_config(checkpoint::load_description(base()).config_yaml, base());
  c.model.dropout = 0;
  const data::Corpus pairs(corpus());
  const auto padded = pairs.padded_lengths("train");
  const int64_t longest = *std::max_element(padded.begin(), padded.end());
  c.data.corpus = corpus();
  c.data.max_tokens = longest * ((kPairs + ranks - 1) / ranks);
  c.data.pool_batches = 1000;
  c.train.max_steps = kSteps;
  c.train.lr = 0.003;
  c.train.clip_norm = 0;
  c.train.label_smoothing = 0;
  c.train.seed = 7;
  c.checkpoint.dir = run;
  c.checkpoint.every_steps = 1;
  c.checkpoint.keep_last = 0;
  c.log.every_steps = 1;
  c.log.tensorboard = false;
  c.lora.base = base();
  c.lora.rank = 4;
  c.lora.alpha = 8;
  c.lora.targets = "q_proj,k_proj,v_proj,out_proj";
  return c;
}

CommandResult train(const config::Config& c, int ranks, const std::string& extra = "") {
  const std::string path = c.checkpoint.dir + ".yaml";
  write_file(path, config::to_yaml(c));
  return run_command((ranks > 1 ? mpirun(ranks) : std::string()) + tool("tandem-train") +
                     " --config " + path + extra);
}

std::vector<double> tandem_losses(const std::string& run) {
  std::vector<double> losses;
  for (const auto& line : lines_of(read_text(run + "/metrics.jsonl"))) {
    const auto record = json::parse(line);
    if (record.contains("loss")) losses.push_back(record["loss"].get<double>());
  }
  return losses;
}

// peft's losses, from the initial A matrices of Tandem's run (its step-1 checkpoint: with B at
// zero, A's gradient is zero on the first step, so Adam leaves A as it was drawn).
std::vector<double> peft_losses(const config::Config& c) {
  const auto first = checkpoint::load(c.checkpoint.dir + "/" + checkpoint::step_file_name(1));
  json settings = {{"rank", c.lora.rank},
                   {"alpha", c.lora.alpha},
                   {"lr", c.train.lr},
                   {"beta1", c.train.adam_beta1},
                   {"beta2", c.train.adam_beta2},
                   {"eps", c.train.adam_eps},
                   {"steps", kSteps},
                   {"targets", {"q_proj", "k_proj", "v_proj", "out_proj"}},
                   {"int8_base", c.lora.base_precision == config::BasePrecision::kInt8}};
  json a = json::object();
  for (const auto& [name, tensor] : first.model) {
    if (name.size() < 7 || name.substr(name.size() - 7) != ".lora_a") continue;
    const auto rows = tensor.to(torch::kFloat64).contiguous();
    std::vector<std::vector<double>> values(rows.size(0));
    for (int64_t i = 0; i < rows.size(0); ++i) {
      const double* row = rows[i].data_ptr<double>();
      values[i].assign(row, row + rows.size(1));
    }
    a[name] = values;
  }
  settings["lora_a"] = a;
  const std::string settings_path = c.checkpoint.dir + "-peft.json";
  write_file(settings_path, settings.dump());
  const auto r = run_command(
      "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib PYTHONPATH=" +
      transformers_path() + " " + python() + " -S " + TANDEM_TESTS_DIR + "/e2e/lora_reference.py " +
      dir() + "/ref/model " + settings_path + " " + dir() + "/train.en " + dir() +
      "/train.es eng_Latn spa_Latn " + c.checkpoint.dir + "-peft-out.json");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  if (r.exit_code != 0) return {};
  const auto out = json::parse(read_text(c.checkpoint.dir + "-peft-out.json"));
  EXPECT_EQ(out["trained"].get<int64_t>(), 2 * (2 * 4 + 2 * 8));  // A and B of 24 projections
  return out["losses"].get<std::vector<double>>();
}

class Lora : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(prepare()) << "the reference, import or prep failed above"; }
};

TEST_F(Lora, EachStepsLossIsPeftsOnOneAndTwoRanks) {
  for (const int ranks : {1, 2}) {
    const auto c = lora_config(dir() + "/peft-" + std::to_string(ranks), ranks);
    const auto run = train(c, ranks);
    ASSERT_EQ(run.exit_code, 0) << run.output;
    EXPECT_NE(run.output.find("adapters of rank 4 beside 24 layers"), std::string::npos)
        << run.output;
    const auto ours = tandem_losses(c.checkpoint.dir);
    const auto theirs = peft_losses(c);
    ASSERT_EQ(ours.size(), static_cast<size_t>(kSteps));
    ASSERT_EQ(theirs.size(), static_cast<size_t>(kSteps));
    double worst = 0;
    for (int i = 0; i < kSteps; ++i) {
      const double relative = std::abs(ours[i] - theirs[i]) / std::abs(theirs[i]);
      worst = std::max(worst, relative);
      EXPECT_LE(relative, 1e-5) << ranks << " rank(s), step " << i + 1 << ": Tandem " << ours[i]
                                << ", peft " << theirs[i];
    }
    std::printf(
        "%d rank(s): loss %.6f -> %.6f over %d steps (peft %.6f -> %.6f), largest "
        "relative difference %.2e\n",
        ranks, ours.front(), ours.back(), kSteps, theirs.front(), theirs.back(), worst);
    EXPECT_LT(ours.back(), ours.front() - 0.05);  // the adapters learned something
  }
}

// A base held in int8 trains as peft does on the weights that int8 stands for (each row's values
// times its scale): the same losses within 1e-5 relative, which differ from the float32 base's.
TEST_F(Lora, AnInt8BaseTrainsAsPeftOnItsDequantizedWeights) {
  auto c = lora_config(dir() + "/int8", 1);
  c.lora.base_precision = config::BasePrecision::kInt8;
  const auto run = train(c, 1);
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("held in int8"), std::string::npos) << run.output;
  const auto ours = tandem_losses(c.checkpoint.dir);
  const auto theirs = peft_losses(c);
  ASSERT_EQ(ours.size(), static_cast<size_t>(kSteps));
  ASSERT_EQ(theirs.size(), static_cast<size_t>(kSteps));
  for (int i = 0; i < kSteps; ++i) {
    EXPECT_LE(std::abs(ours[i] - theirs[i]) / std::abs(theirs[i]), 1e-5)
        << "step " << i + 1 << ": Tandem " << ours[i] << ", peft " << theirs[i];
  }
  auto fp32 = lora_config(dir() + "/int8-fp32", 1);
  fp32.train.max_steps = 1;
  ASSERT_EQ(train(fp32, 1).exit_code, 0);
  const double first = tandem_losses(fp32.checkpoint.dir).front();
  EXPECT_NE(ours.front(), first);  // int8 rounded the weights
  EXPECT_LT(std::abs(ours.front() - first) / first, 1e-2);
  std::printf("int8 base: loss %.6f -> %.6f over %d steps (peft %.6f -> %.6f); float32 base's "
              "first %.6f\n",
              ours.front(), ours.back(), kSteps, theirs.front(), theirs.back(), first);
}

// The adapter checkpoint translates as its merge into a plain checkpoint does, and as CTranslate2
// does on the export of either: greedy, line for line.
TEST_F(Lora, TheMergedExportDecodesAsTheAdapterCheckpoint) {
  auto c = lora_config(dir() + "/merge", 1);
  c.train.max_steps = 8;
  c.checkpoint.every_steps = 8;
  ASSERT_EQ(train(c, 1).exit_code, 0);
  const std::string adapters = c.checkpoint.dir + "/last.h5", merged = dir() + "/merged.h5";
  const auto stored = checkpoint::load(adapters);
  EXPECT_EQ(stored.model.size(), 48u);  // the adapters alone
  EXPECT_EQ(stored.lora_base_hash.size(), 16u);
  const auto exported = run_command(tool("tandem-export") + " --checkpoint " + adapters +
                                    " --to tandem --out " + merged);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto plain = checkpoint::load(merged);
  EXPECT_EQ(plain.model.size(), checkpoint::load(base()).model.size());
  EXPECT_TRUE(plain.lora_base_hash.empty());
  EXPECT_TRUE(config::parse_config(plain.config_yaml, merged).lora.base.empty());
  const std::string src = bible_text().file("test.src");
  const auto decode = [&](const std::string& checkpoint) {
    const auto r =
        run_command(tool("tandem-decode") + " --checkpoint " + checkpoint + kLanguages +
                    " --beam 1 --max-len-a 0 --max-len-b 20 --min-len 0 < " + src + " 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return lines_of(r.output);
  };
  const auto from_adapters = decode(adapters), from_merge = decode(merged),
             from_base = decode(base());
  ASSERT_EQ(from_adapters.size(), lines_of(read_text(src)).size());
  EXPECT_EQ(from_adapters, from_merge);
  EXPECT_NE(from_adapters, from_base);  // the adapters changed the translations
  const std::string ct2 = dir() + "/merged-ct2";
  const auto to_ct2 = run_command(tool("tandem-export") + " --checkpoint " + adapters +
                                  " --to ctranslate2 --force --out " + ct2);
  ASSERT_EQ(to_ct2.exit_code, 0) << to_ct2.output;
  const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/ctranslate2.sh");
  ASSERT_EQ(install.exit_code, 0) << install.output;
  const auto r =
      run_command("PYTHONPATH=" + lines_of(install.output).back() + " " + python() + " " +
                  TANDEM_LAUNCH_DIR + "/ctranslate2-decode.py " + ct2 + " " + src + " " + dir() +
                  "/ct2.hyp --beam 1 --min-len 0 --max-len 20" +
                  " --max-input-len 128 --source-prefix eng_Latn --target-prefix " + "spa_Latn");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(lines_of(read_text(dir() + "/ct2.hyp")), from_adapters);
}

// An adapter set with one matrix of the wrong shape, in the layer merged last (its path sorts
// last, so every other adapter would be merged before it): tandem-export --to tandem refuses it
// with exit code 2 and one line naming the adapter, and writes nothing. (That no weight changes
// before the refusal is tests/model/lora_test.cpp's AMergeOfASetWithOneBadMatrixChangesNoWeight.)
TEST_F(Lora, AnAdapterSetWithOneMisshapenMatrixIsRefusedAndNothingIsWritten) {
  auto c = lora_config(dir() + "/misshapen", 1);
  c.train.max_steps = 1;
  ASSERT_EQ(train(c, 1).exit_code, 0);
  auto data = checkpoint::load(c.checkpoint.dir + "/last.h5");
  std::string last;
  for (const auto& [name, tensor] : data.model) {
    last = std::max(last, name.substr(0, name.rfind('.')));
  }
  for (auto* group : {&data.model, &data.ema}) {
    for (auto& [name, tensor] : *group) {
      if (name == last + ".lora_b") tensor = torch::zeros({tensor.size(0), tensor.size(1) + 1});
    }
  }
  const std::string bad = dir() + "/misshapen.h5", out = dir() + "/misshapen-merged.h5";
  checkpoint::save(bad, data);
  const auto r = run_command(tool("tandem-export") + " --checkpoint " + bad +
                             " --to tandem --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find("adapter '" + last + "' does not fit its layer's weight"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(fs::exists(out));
}

// Each refused with exit code 2 and one line (a resume on a changed base: after the run's banner
// line); a run writes no checkpoint, a resume overwrites none.
TEST_F(Lora, BadInputIsRefusedWithExitCode2AndNothingWritten) {
  const auto refused = [](const CommandResult& r, const std::string& says) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
  };
  const auto nothing_written = [](const std::string& run) {
    EXPECT_TRUE(checkpoint::step_files(run).empty()) << run;
  };
  {
    auto c = lora_config(dir() + "/bad-rank", 1);
    c.lora.rank = 0;
    refused(train(c, 1), "lora.rank: expected >= 1, got 0");
    nothing_written(c.checkpoint.dir);
  }
  {
    auto c = lora_config(dir() + "/bad-target", 1);
    c.lora.targets = "q_proj,self_attn.fc1";
    refused(train(c, 1), "lora.targets: 'self_attn.fc1' names no layer");
    nothing_written(c.checkpoint.dir);
  }
  // An adapter checkpoint whose base is gone, then one whose base holds other weights.
  const std::string moved = dir() + "/moved-base.h5";
  fs::copy_file(base(), moved, fs::copy_options::overwrite_existing);
  auto c = lora_config(dir() + "/moved", 1);
  c.lora.base = moved;
  c.train.max_steps = 2;
  ASSERT_EQ(train(c, 1).exit_code, 0);
  const std::string adapters = c.checkpoint.dir + "/last.h5";
  const auto bytes = read_text(adapters);
  // Other weights of the base's shape: the run's own merge.
  const std::string other = dir() + "/moved-merged.h5";
  ASSERT_EQ(run_command(tool("tandem-export") + " --checkpoint " + adapters +
                        " --to tandem --out " + other)
                .exit_code,
            0);
  fs::remove(moved);
  const std::string decode = tool("tandem-decode") + " --checkpoint " + adapters + kLanguages;
  refused(run_command(decode + " < " + bible_text().file("test.src")), "cannot serve");
  fs::copy_file(other, moved);
  refused(run_command(decode + " < " + bible_text().file("test.src")), "now holds other weights");
  const std::string out = dir() + "/refused.h5";
  refused(run_command(tool("tandem-export") + " --checkpoint " + adapters + " --to tandem --out " +
                      out),
          "now holds other weights");
  EXPECT_FALSE(fs::exists(out));
  // Resuming the run on the changed base.
  c.train.max_steps = 4;
  const auto resumed = train(c, 1);  // after the run's banner line
  EXPECT_EQ(resumed.exit_code, 2) << resumed.output;
  EXPECT_NE(lines_of(resumed.output).back().find("content hash"), std::string::npos)
      << resumed.output;
  EXPECT_EQ(read_text(adapters), bytes);
  EXPECT_EQ(checkpoint::step_files(c.checkpoint.dir).size(), 2u);
}

}  // namespace
}  // namespace tandem::test
