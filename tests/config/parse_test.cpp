#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "trainer/common/temp_dir.h"
#include "trainer/config/config.h"

namespace tandem::config {
namespace {

// The message of the std::invalid_argument that parse_config throws, or a failure.
std::string parse_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_config(yaml, "my.yaml", overrides);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for:\n" << yaml;
  return "";
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

const char* kMinimal = "data:\n  corpus: c.h5\n";

TEST(ParseConfig, MissingKeysKeepTheirDefaults) {
  const Config c = parse_config(kMinimal, "my.yaml");
  EXPECT_EQ(c.data.corpus, "c.h5");
  EXPECT_EQ(c.model.d_model, 256);
  EXPECT_EQ(c.model.heads, 4);
  EXPECT_EQ(c.train.lr, 3.0e-4);
  EXPECT_EQ(c.train.schedule, Schedule::kConstant);
  // What every checkpoint written before these keys existed had: relu, interleaved positions.
  EXPECT_EQ(c.model.activation, Activation::kRelu);
  EXPECT_EQ(c.model.positions, PositionLayout::kInterleaved);
  EXPECT_EQ(c.checkpoint.keep_last, 5);
  EXPECT_EQ(c.log.every_steps, 50);
}

// The closed sets are resolved while reading: a value outside one names the key and every spelling.
TEST(ParseConfig, ClosedSetsNameEveryAllowedValue) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train.schedule=cosine", "train.schedule: expected constant or inverse_sqrt, got 'cosine'"},
      {"train.device=gpu", "train.device: expected auto, cpu or cuda, got 'gpu'"},
      {"train.precision=fp16", "train.precision: expected fp32 or bf16, got 'fp16'"},
      {"model.activation=gelu", "model.activation: expected relu or swish, got 'gelu'"},
      {"model.positions=learned",
       "model.positions: expected interleaved, halves or fairseq, got 'learned'"},
  };
  for (const auto& [override_text, message] : cases) {
    const std::string error = parse_error(kMinimal, {override_text});
    EXPECT_EQ(error, "my.yaml: --set '" + override_text + "': " + message);
  }
  EXPECT_EQ(parse_error("data: {corpus: c.h5}\ntrain:\n  schedule: [constant]\n"),
            "my.yaml:3: train.schedule: expected constant or inverse_sqrt, got a list");
}

TEST(ParseConfig, ClosedSetsReadEverySpelling) {
  const Config c = parse_config(
      "data: {corpus: c.h5}\n"
      "train: {schedule: inverse_sqrt, warmup_steps: 10, device: cpu, precision: 'bf16'}\n"
      "valid: {metric: chrf}\n"
      "model: {activation: swish, positions: halves}\n",
      "my.yaml");
  EXPECT_EQ(c.model.activation, Activation::kSwish);
  EXPECT_EQ(c.model.positions, PositionLayout::kHalves);
  EXPECT_EQ(parse_config(kMinimal, "my.yaml", {"model.positions=fairseq"}).model.positions,
            PositionLayout::kFairseq);
  EXPECT_EQ(c.train.schedule, Schedule::kInverseSqrt);
  EXPECT_EQ(c.train.device, Device::kCpu);
  EXPECT_EQ(c.train.precision, Precision::kBf16);
  EXPECT_EQ(c.valid.metric.figure, ValidMetric::kChrf);
  EXPECT_EQ(c.valid.metric.over, "");
  EXPECT_EQ(parse_config(kMinimal, "my.yaml", {"train.device=cuda"}).train.device, Device::kCuda);
}

// valid.metric: a figure of the whole split, of the corpora's mean, or of one corpus (whose name
// may hold '_'); anything else names the key, the forms and the text.
TEST(ParseConfig, ValidMetricNamesAFigureOfTheSplitTheMeanOrOneCorpus) {
  const std::vector<std::tuple<std::string, std::string, ValidMetric>> good = {
      {"bleu", "", ValidMetric::kBleu},
      {"loss", "", ValidMetric::kLoss},
      {"mean_chrf", "mean", ValidMetric::kChrf},
      {"es-en_loss", "es-en", ValidMetric::kLoss},
      {"web_crawl.v2_bleu", "web_crawl.v2", ValidMetric::kBleu},
  };
  for (const auto& [text, over, figure] : good) {
    const ValidMetricChoice choice =
        parse_config(kMinimal, "my.yaml", {"valid.metric=" + text}).valid.metric;
    EXPECT_EQ(choice.over, over) << text;
    EXPECT_EQ(choice.figure, figure) << text;
    EXPECT_EQ(to_text(choice), text);
  }
  for (const std::string bad : {"rouge", "_bleu", "es-en_rouge", "es-en", "bleu_"}) {
    EXPECT_EQ(parse_error(kMinimal, {"valid.metric=" + bad}),
              "my.yaml: --set 'valid.metric=" + bad +
                  "': valid.metric: expected bleu, chrf or loss, of the whole valid split, or "
                  "mean_<figure> or <corpus>_<figure> with several corpora, got '" +
                  bad + "'")
        << bad;
  }
  EXPECT_EQ(parse_error("data: {corpus: c.h5}\nvalid:\n  metric: [bleu]\n"),
            "my.yaml:3: valid.metric: expected a figure such as bleu, mean_bleu or es-en_bleu, got "
            "a list");
}

// data.weights: "name:weight,..." or a mapping, read once into (corpus, weight) entries in their
// order; a bad entry names the key and the entry.
TEST(ParseConfig, CorpusWeightsAreReadFromTextOrAMapping) {
  const Config text =
      parse_config("data: {corpus: c.h5, weights: 'en-es:1, es-en : 2.5'}\n", "my.yaml");
  ASSERT_EQ(text.data.weights.size(), 2u);
  EXPECT_EQ(text.data.weights[0].corpus, "en-es");
  EXPECT_EQ(text.data.weights[0].weight, 1.0);
  EXPECT_EQ(text.data.weights[1].corpus, "es-en");
  EXPECT_EQ(text.data.weights[1].weight, 2.5);
  EXPECT_EQ(to_text(text.data.weights), "en-es:1,es-en:2.5");
  const Config map =
      parse_config("data:\n  corpus: c.h5\n  weights: {web: 3, bible: 0.5}\n", "my.yaml");
  ASSERT_EQ(map.data.weights.size(), 2u);
  EXPECT_EQ(map.data.weights[0].corpus, "web");  // the mapping's order, not sorted
  EXPECT_EQ(map.data.weights[0].weight, 3.0);
  EXPECT_EQ(map.data.weights[1].corpus, "bible");
  EXPECT_EQ(map.data.weights[1].weight, 0.5);
  EXPECT_TRUE(parse_config("data: {corpus: c.h5, weights: ''}\n", "my.yaml").data.weights.empty());
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"'a:1,b:-2'", "'b:-2': the weight is not a positive number"},
      {"'a:1,a:2'", "'a:2': corpus 'a' is weighted twice"},
      {"'a'", "'a': expected name:weight"},
      {"'a:1,'", "'': expected name:weight"},
      {"{a: x}", "'a: x': the weight is not a positive number"},
      {"{a: 1, b: 0}", "'b: 0': the weight is not a positive number"},
      {"{a: '1'}", "'a': expected a number, got the quoted string '1'"},
  };
  for (const auto& [value, message] : bad) {
    EXPECT_EQ(parse_error("data:\n  corpus: c.h5\n  weights: " + value + "\n"),
              "my.yaml:3: data.weights: " + message)
        << value;
  }
  EXPECT_EQ(parse_error(kMinimal, {"data.weights=a:1,b:x"}),
            "my.yaml: --set 'data.weights=a:1,b:x': data.weights: 'b:x': the weight is not a "
            "positive number");
}

TEST(ParseConfig, ReadsEveryFieldType) {
  const Config c = parse_config(
      "model: {d_model: 512, heads: 8, dropout: .25, pre_norm: true, tie_embeddings: True}\n"
      "data: {corpus: 'x y.h5', seed: 18446744073709551615}\n"
      "train: {lr: 1e-3, max_minutes: 90, max_steps: +7}\n",
      "my.yaml");
  EXPECT_EQ(c.model.d_model, 512);
  EXPECT_EQ(c.model.heads, 8);
  EXPECT_EQ(c.model.dropout, 0.25);
  EXPECT_TRUE(c.model.pre_norm);
  EXPECT_TRUE(c.model.tie_embeddings);
  EXPECT_EQ(c.data.corpus, "x y.h5");
  EXPECT_EQ(c.data.seed, UINT64_MAX);
  EXPECT_EQ(c.train.lr, 0.001);
  EXPECT_EQ(c.train.max_minutes, 90.0);
  EXPECT_EQ(c.train.max_steps, 7);
}

TEST(ParseConfig, ASectionInsideASectionReadsFromTheFileAndFromOverrides) {
  const Config c = parse_config(
      "data: {corpus: c.h5}\n"
      "train:\n  lr: 0.5\n  alignment:\n    weight: 0.05\n    layer: -2\n",
      "my.yaml", {"train.alignment.heads=2"});
  EXPECT_EQ(c.train.lr, 0.5);
  EXPECT_EQ(c.train.alignment.weight, 0.05);
  EXPECT_EQ(c.train.alignment.layer, -2);
  EXPECT_EQ(c.train.alignment.heads, 2);
  EXPECT_FALSE(c.train.alignment.shift) << "without the key, as checkpoints written before it";
  EXPECT_FALSE(c.train.alignment.shift_read());
  const Config shifted = parse_config("data: {corpus: c.h5}\n", "my.yaml",
                                      {"train.alignment.shift=true"});
  EXPECT_FALSE(shifted.train.alignment.shift_read()) << "no guided heads: read where predicted";
  EXPECT_TRUE(parse_config("data: {corpus: c.h5}\n", "my.yaml",
                           {"train.alignment.shift=true", "train.alignment.weight=0.1"})
                  .train.alignment.shift_read());
  const std::string typo =
      parse_error("data: {corpus: c.h5}\ntrain:\n  alignment:\n    wieght: 0.05\n");
  EXPECT_TRUE(starts_with(typo, "my.yaml:4: ")) << typo;
  EXPECT_NE(typo.find("unknown key train.alignment.wieght (did you mean train.alignment.weight?)"),
            std::string::npos)
      << typo;
  const std::string twice = parse_error(
      "data: {corpus: c.h5}\ntrain:\n  alignment: {weight: 1}\n  alignment: {layer: 1}\n");
  EXPECT_NE(twice.find("train.alignment: given twice"), std::string::npos) << twice;
  const std::string scalar = parse_error("data: {corpus: c.h5}\ntrain: {alignment: 0.05}\n");
  EXPECT_NE(scalar.find("train.alignment: expected a mapping of keys, got '0.05'"),
            std::string::npos)
      << scalar;
}

TEST(ParseConfig, EmptySectionKeepsDefaults) {
  const Config c = parse_config("model:\ndata: {corpus: c.h5}\n", "my.yaml");
  EXPECT_EQ(c.model.d_ff, 1024);
}

TEST(ParseConfig, UnknownKeyNamesFullPathLineAndSuggestsClosest) {
  const std::string error = parse_error("data: {corpus: c.h5}\nmodel:\n  d_modle: 512\n");
  EXPECT_TRUE(starts_with(error, "my.yaml:3: ")) << error;
  EXPECT_NE(error.find("unknown key model.d_modle"), std::string::npos) << error;
  EXPECT_NE(error.find("did you mean model.d_model?"), std::string::npos) << error;
}

TEST(ParseConfig, KeyInTheWrongSectionSuggestsItsSection) {
  const std::string error = parse_error("data: {corpus: c.h5}\nmodel: {lr: 0.1}\n");
  EXPECT_NE(error.find("unknown key model.lr (did you mean train.lr?)"), std::string::npos)
      << error;
}

TEST(ParseConfig, UnknownSectionSuggestsClosestSection) {
  const std::string error = parse_error("data: {corpus: c.h5}\ntrian: {lr: 0.1}\n");
  EXPECT_TRUE(starts_with(error, "my.yaml:2: ")) << error;
  EXPECT_NE(error.find("unknown section 'trian' (did you mean train?)"), std::string::npos)
      << error;
}

TEST(ParseConfig, KeyWithoutSectionSuggestsItsFullPath) {
  const std::string error = parse_error("data: {corpus: c.h5}\nd_model: 512\n");
  EXPECT_NE(error.find("did you mean model.d_model?"), std::string::npos) << error;
}

TEST(ParseConfig, WrongTypesNameKeyValueAndExpectedType) {
  EXPECT_NE(
      parse_error("train: {lr: fast}").find("my.yaml:1: train.lr: expected a number, got 'fast'"),
      std::string::npos);
  EXPECT_NE(
      parse_error("model: {d_model: 1.5}").find("model.d_model: expected an integer, got '1.5'"),
      std::string::npos);
  EXPECT_NE(parse_error("model: {heads: '8'}")
                .find("model.heads: expected an integer, got the quoted string '8'"),
            std::string::npos);
  EXPECT_NE(parse_error("model: {pre_norm: yes}")
                .find("model.pre_norm: expected true or false, got 'yes'"),
            std::string::npos);
  EXPECT_NE(
      parse_error("data: {seed: -1}").find("data.seed: expected a non-negative integer, got '-1'"),
      std::string::npos);
  EXPECT_NE(
      parse_error("data: {corpus: [a, b]}").find("data.corpus: expected a string, got a list"),
      std::string::npos);
  EXPECT_NE(
      parse_error("model: {d_ff: 99999999999999999999}").find("model.d_ff: expected an integer"),
      std::string::npos);
  EXPECT_NE(parse_error("model: 3").find("model: expected a mapping of keys, got '3'"),
            std::string::npos);
}

// data.max_tokens takes a number or the word auto (resolved at start-up, train/batch_fit.h), in
// the file and in an override; anything else names both.
TEST(ParseConfig, MaxTokensTakesAutoOrANumber) {
  EXPECT_EQ(parse_config("data: {corpus: c.h5, max_tokens: auto}", "my.yaml").data.max_tokens,
            kAutoMaxTokens);
  EXPECT_EQ(parse_config(kMinimal, "my.yaml", {"data.max_tokens=auto"}).data.max_tokens,
            kAutoMaxTokens);
  EXPECT_EQ(parse_config("data: {corpus: c.h5, max_tokens: auto}", "my.yaml",
                         {"data.max_tokens=8192"})
                .data.max_tokens,
            8192);
  EXPECT_NE(parse_error("data: {corpus: c.h5, max_tokens: Auto}")
                .find("data.max_tokens: expected an integer or auto, got 'Auto'"),
            std::string::npos);
  EXPECT_NE(parse_error(kMinimal, {"data.max_tokens='auto'"})
                .find("data.max_tokens: expected an integer or auto, got the quoted string"),
            std::string::npos);
  // Other integers do not take it.
  EXPECT_NE(parse_error("data: {corpus: c.h5, seed: auto}")
                .find("data.seed: expected a non-negative integer, got 'auto'"),
            std::string::npos);
  EXPECT_NE(parse_error("data: {corpus: c.h5}\nmodel: {d_model: auto}")
                .find("model.d_model: expected an integer, got 'auto'"),
            std::string::npos);
}

TEST(ParseConfig, DuplicateKeyIsAnError) {
  const std::string error = parse_error("data: {corpus: c.h5}\nmodel:\n  heads: 8\n  heads: 4\n");
  EXPECT_NE(error.find("my.yaml:4: model.heads: given twice"), std::string::npos) << error;
}

TEST(ParseConfig, SyntaxErrorNamesSourceAndLine) {
  const std::string error = parse_error("data: {corpus: c.h5}\nmodel:\n  d_model: [1,\n");
  EXPECT_TRUE(starts_with(error, "my.yaml:4:")) << error;
  EXPECT_NE(error.find("YAML syntax error"), std::string::npos) << error;
}

TEST(ParseConfig, ValidationErrorsStartWithSource) {
  const std::string error = parse_error("data: {corpus: c.h5}\nmodel: {heads: 3}\n");
  EXPECT_TRUE(starts_with(error, "my.yaml: model.heads:")) << error;
}

TEST(Overrides, ApplyOnTopOfTheFileAsTypedScalars) {
  const Config c = parse_config("data: {corpus: c.h5}\ntrain: {lr: 0.1}\n", "my.yaml",
                                {"train.lr=1e-3", "model.pre_norm=true", "data.corpus=a=b.h5",
                                 "train.lr=2e-3", "model.d_model=512"});
  EXPECT_EQ(c.train.lr, 0.002);  // the last override of a key wins
  EXPECT_TRUE(c.model.pre_norm);
  EXPECT_EQ(c.data.corpus, "a=b.h5");  // only the first '=' separates key and value
  EXPECT_EQ(c.model.d_model, 512);
}

TEST(Overrides, CanSupplyARequiredKey) {
  const Config c = parse_config("", "my.yaml", {"data.corpus=c.h5"});
  EXPECT_EQ(c.data.corpus, "c.h5");
}

TEST(Overrides, UnknownKeyNamesOverrideAndSuggests) {
  const std::string error = parse_error(kMinimal, {"model.d_modle=3"});
  EXPECT_TRUE(starts_with(error, "my.yaml: --set 'model.d_modle=3': ")) << error;
  EXPECT_NE(error.find("unknown key model.d_modle (did you mean model.d_model?)"),
            std::string::npos)
      << error;
}

TEST(Overrides, WrongTypeNamesKeyAndValue) {
  const std::string error = parse_error(kMinimal, {"train.lr=fast"});
  EXPECT_NE(error.find("--set 'train.lr=fast': train.lr: expected a number, got 'fast'"),
            std::string::npos)
      << error;
}

TEST(Overrides, MissingEqualsSignIsAnErrorNamingTheOverride) {
  const std::string error = parse_error(kMinimal, {"train.lr"});
  EXPECT_NE(error.find("--set 'train.lr': expected key.path=value"), std::string::npos) << error;
}

TEST(Overrides, ResultIsValidated) {
  const std::string error = parse_error(kMinimal, {"model.heads=5"});
  EXPECT_NE(error.find("model.heads: expected a divisor of model.d_model (256), got 5"),
            std::string::npos)
      << error;
}

class LoadConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("tandem_config_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { remove_tree(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(LoadConfigTest, ReadsFileAndAppliesOverrides) {
  const std::string path = write("a.yaml", "data: {corpus: c.h5}\nmodel: {d_ff: 64}\n");
  const Config c = load_config(path, {"model.dropout=0"});
  EXPECT_EQ(c.model.d_ff, 64);
  EXPECT_EQ(c.model.dropout, 0.0);
}

TEST_F(LoadConfigTest, ErrorsStartWithTheFileName) {
  const std::string path = write("b.yaml", "data: {corpus: c.h5}\n\nmodel: {d_modle: 64}\n");
  try {
    load_config(path);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(starts_with(e.what(), path + ":3: unknown key model.d_modle")) << e.what();
  }
}

TEST_F(LoadConfigTest, MissingFileNamesThePath) {
  const std::string path = (dir_ / "absent.yaml").string();
  try {
    load_config(path);
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'" + path + "'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tandem::config
