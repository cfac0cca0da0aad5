// tandem-export --to huggingface through the real tools, and Hugging Face transformers itself (its
// pinned Python package from launch/transformers.sh, run by tests/e2e/hf_export_check.py) loading
// and running what it wrote, as a user would: checkpoints trained here on the synthetic
// reverse-the-words corpus, tied with the paper's interleaved positions, untied with swish and
// MarianMT's positions, pre-norm, and a multilingual one with >>xx<< tags.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"
#include "tests/e2e/small_runs.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The test lines transformers runs (each one through generate() twice).
constexpr size_t kLines = 100;

// How many of `a` equal `b`, line by line.
size_t same_lines(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  size_t same = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) same += a[i] == b[i];
  return same;
}

class ExportHf : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("export-hf");
    prepare_reverse_corpus(*dir_, 3000, kLines);
    prepare_two_directions(*dir_);
    const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/transformers.sh");
    ASSERT_EQ(install.exit_code, 0) << install.output;
    python_path_ = new std::string(lines_of(install.output).back());
    train("tied", "corpus.h5", 400, "--set train.ema_decay=0.99");
    train("untied", "corpus.h5", 400,
          "--set model.tie_embeddings=false --set model.activation=swish "
          "--set model.positions=halves");
    train("multi", "multi.h5", 400, "");
    train("prenorm", "corpus.h5", 400, "--set model.pre_norm=true --set model.activation=swish");
    train("fairseq", "corpus.h5", 2, "--set model.pre_norm=true --set model.positions=fairseq");
    // LoRA adapters on the tied model, trained on its own task from its weights.
    train("lora", "corpus.h5", 100,
          "--set lora.base=" + checkpoint("tied") + " --set lora.rank=4 --set lora.alpha=8");
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete python_path_;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string checkpoint(const std::string& name) {
    return file("run-" + name + "/last.h5");
  }

  // Tied embeddings unless `flags` say otherwise.
  static void train(const std::string& name, const std::string& corpus, int steps,
                    const std::string& flags) {
    train_small_model(*dir_, name, corpus, steps, "--set model.tie_embeddings=true " + flags);
  }

  static CommandResult export_hf(const std::string& name, const std::string& out,
                                 const std::string& flags = "") {
    return run_command(tool("tandem-export") + " --checkpoint " + checkpoint(name) +
                       " --to huggingface --out " + out + " " + flags);
  }

  // transformers' run of `folder` on the test lines (hf_export_check.py's JSON).
  static json transformers_run(const std::string& folder, const std::string& prefix = "") {
    const char* python = std::getenv("PYTHON");
    const std::string out = folder + (prefix.empty() ? "" : ".tagged") + ".json";
    const auto r = run_command(
        "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib PYTHONPATH=" + *python_path_ +
        " " + (python != nullptr ? python : "python3") + " -S " + TANDEM_TESTS_DIR +
        "/e2e/hf_export_check.py " + folder + " " + file("test.src") + " " + file("test.tgt") +
        " " + out + (prefix.empty() ? "" : " --prefix '" + prefix + "'"));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return json::parse(read_text(out));
  }

  // tandem-decode's lines for the test sources.
  static std::vector<std::string> decoded(const std::string& name, const std::string& flags) {
    const auto r = run_command(tool("tandem-decode") + " --checkpoint " + checkpoint(name) + " " +
                               flags + " < " + file("test.src") + " 2>/dev/null");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return lines_of(r.output);
  }

  // The folder loads without a word about weights; transformers' teacher-forced NLL is
  // tandem-eval's within 1e-5 relative over the same tokens; greedy generate() gives tandem-decode
  // --beam 1's lines (at least 99 of 100), and beam 4 with the folder's generation_config most of
  // tandem-decode's (printed).
  static void expect_transformers_computes_tandems(const std::string& name) {
    const std::string out = file("hf-" + name);
    const auto exported = export_hf(name, out);
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    const json hf = transformers_run(out);
    EXPECT_TRUE(hf["load_notes"].empty()) << hf["load_notes"].dump();
    const auto eval = run_command(tool("tandem-eval") + " --checkpoint " + checkpoint(name) +
                                  " --src " + file("test.src") + " --ref " + file("test.tgt") +
                                  " --json");
    ASSERT_EQ(eval.exit_code, 0) << eval.output;
    const json tandem = last_json_line(eval.output);
    ASSERT_EQ(hf["tokens"], tandem["tokens"]);
    const double loss = tandem["loss"].get<double>();
    EXPECT_NEAR(hf["nll"].get<double>() / hf["tokens"].get<double>(), loss, 1e-5 * loss);
    const auto greedy = decoded(name, "--beam 1"), beam = decoded(name, "");
    const auto hf_greedy = hf["greedy"].get<std::vector<std::string>>();
    const auto hf_beam = hf["beam"].get<std::vector<std::string>>();
    ASSERT_EQ(hf_greedy.size(), greedy.size());
    const size_t same_greedy = same_lines(hf_greedy, greedy), same_beam = same_lines(hf_beam, beam);
    std::printf("%s: NLL %.9f (transformers) %.9f (tandem-eval); greedy %zu of %zu lines the "
                "same, beam 4 %zu\n",
                name.c_str(), hf["nll"].get<double>() / hf["tokens"].get<double>(), loss,
                same_greedy, greedy.size(), same_beam);
    EXPECT_GE(same_greedy * 100, greedy.size() * 99);
    EXPECT_GE(same_beam * 100, beam.size() * 90);
  }

  static TempDir* dir_;
  static std::string* python_path_;
};
TempDir* ExportHf::dir_ = nullptr;
std::string* ExportHf::python_path_ = nullptr;

TEST_F(ExportHf, TransformersComputesWhatTandemDoesForTiedEmbeddingsAndInterleavedPositions) {
  expect_transformers_computes_tandems("tied");
  const auto provenance = json::parse(read_text(file("hf-tied/tandem.json")));
  EXPECT_EQ(provenance["weights"], "averaged");
  EXPECT_EQ(provenance["step"], 400);
}

TEST_F(ExportHf, TransformersComputesWhatTandemDoesForUntiedEmbeddingsSwishAndHalves) {
  expect_transformers_computes_tandems("untied");
}

// Pre-norm layers: a Pegasus model, its table the interleaved one reordered.
TEST_F(ExportHf, TransformersComputesWhatTandemDoesForPreNormLayers) {
  expect_transformers_computes_tandems("prenorm");
  EXPECT_EQ(json::parse(read_text(file("hf-prenorm/config.json")))["model_type"], "pegasus");
}

// A LoRA checkpoint exports merged: transformers computes what the adapter checkpoint does (not
// the base: its NLL differs).
TEST_F(ExportHf, ALoraCheckpointExportsMergedAndComputesWhatTheAdaptersDo) {
  expect_transformers_computes_tandems("lora");
  const json lora = json::parse(read_text(file("hf-lora.json")));
  const json base = json::parse(read_text(file("hf-tied.json")));
  EXPECT_NE(lora["nll"], base["nll"]);
}

// A model of two directions chosen by >>r<< and >>c<<: each direction's greedy lines are
// tandem-decode --target-lang's, the tag typed before the line as MarianTokenizer reads it.
TEST_F(ExportHf, AMultilingualModelTranslatesEachDirectionAsTandemDecodes) {
  const std::string out = file("hf-multi");
  const auto exported = export_hf("multi", out);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  std::vector<std::string> first;
  for (const char* lang : {"r", "c"}) {
    const json hf = transformers_run(out, std::string(">>") + lang + "<< ");
    const auto hf_greedy = hf["greedy"].get<std::vector<std::string>>();
    const auto tandem = decoded("multi", std::string("--beam 1 --target-lang ") + lang);
    const size_t same = same_lines(hf_greedy, tandem);
    std::printf("multi, >>%s<<: greedy %zu of %zu lines the same\n", lang, same, tandem.size());
    EXPECT_GE(same * 100, tandem.size() * 99) << lang;
    if (first.empty()) {
      first = tandem;
    } else {
      EXPECT_LT(same_lines(first, tandem), tandem.size() / 5) << "the tag should choose";
    }
  }
}

TEST_F(ExportHf, TheFolderHoldsTheTokenizerAndTandemDecodesSearch) {
  const std::string out = file("hf-files");
  ASSERT_EQ(export_hf("tied", out).exit_code, 0);
  for (const char* name : {"config.json", "generation_config.json", "model.safetensors",
                           "source.spm", "target.spm", "vocab.json", "tokenizer_config.json",
                           "special_tokens_map.json", "tandem.json"}) {
    EXPECT_TRUE(fs::exists(out + "/" + name)) << name;
  }
  const json generation = json::parse(read_text(out + "/generation_config.json"));
  EXPECT_EQ(generation["num_beams"], 4);
  EXPECT_DOUBLE_EQ(generation["length_penalty"].get<double>(), 0.6);
  EXPECT_EQ(generation["decoder_start_token_id"], 2) << "Tandem's decoder starts with <s>";
  EXPECT_EQ(generation["bad_words_ids"], json::parse("[[0], [2]]")) << "<pad> and <s>";
  const json config = json::parse(read_text(out + "/config.json"));
  EXPECT_EQ(config["model_type"], "marian");
  const json vocab = json::parse(read_text(out + "/vocab.json"));
  EXPECT_EQ(vocab["<pad>"], 0);
  EXPECT_EQ(vocab["</s>"], 3);
}

TEST_F(ExportHf, BadInputExitsTwoOnOneLineAndLeavesWhatWasThere) {
  const auto expect_refused = [](const CommandResult& r, const std::string& expected) {
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
    EXPECT_NE(r.output.find(expected), std::string::npos) << r.output;
  };
  // A folder of the user's: refused without --force, and with it too (no model.safetensors).
  const std::string mine = file("mine");
  fs::create_directories(mine);
  write_file(mine + "/notes.txt", "keep me");
  expect_refused(export_hf("tied", mine), "already exists; give --force");
  expect_refused(export_hf("tied", mine, "--force"), "no model.safetensors");
  EXPECT_EQ(read_text(mine + "/notes.txt"), "keep me");
  // An earlier export is replaced with --force.
  const std::string earlier = file("hf-earlier");
  ASSERT_EQ(export_hf("tied", earlier).exit_code, 0);
  EXPECT_EQ(export_hf("untied", earlier, "--force").exit_code, 0);
  EXPECT_EQ(json::parse(read_text(earlier + "/config.json"))["tie_word_embeddings"], false);
  // What no transformers class computes, and a flag of another format: nothing written.
  expect_refused(export_hf("fairseq", file("hf-fairseq")), "model.positions: fairseq");
  EXPECT_FALSE(fs::exists(file("hf-fairseq")));
  expect_refused(export_hf("tied", file("hf-int8"), "--quantization int8"), "--quantization");
  EXPECT_FALSE(fs::exists(file("hf-int8")));
  const auto unknown = run_command(tool("tandem-export") + " --checkpoint " + checkpoint("tied") +
                                   " --to onnx --out " + file("hf-onnx"));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_FALSE(fs::exists(file("hf-onnx")));
}

}  // namespace
}  // namespace tandem::test
