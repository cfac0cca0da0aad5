// tandem-import against Hugging Face transformers itself (its pinned Python package from
// launch/transformers.sh): a small MarianMTModel with random weights and two SentencePiece models,
// built and run by tests/e2e/marian_reference.py on the synthetic corpus, imported by the real
// tool; then its tokenization, teacher-forced log-probabilities and greedy translations against
// MarianTokenizer's and the model's, fine-tuning on 2 ranks with a bitwise resume, and bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <tuple>

#include "data/corpus/corpus.h"
#include "data/vocab/vocab.h"
#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/import_checks.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/token_ids.h"
#include "trainer/import/safetensors.h"
#include "trainer/model_io/model_io.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The greedy translations' length: HF stops at MAX_NEW_TOKENS with EOS forced last (the config's
// forced_eos_token_id, as OPUS-MT's), Tandem after one step fewer without it: the same text.
constexpr int kMaxNewTokens = 12;

class Import : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("import");
    SyntheticCorpusOptions options;
    options.train_pairs = 2000;
    options.test_pairs = 40;
    make_reverse_corpus(dir_->path(), options);
    const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/transformers.sh");
    ASSERT_EQ(install.exit_code, 0) << install.output;
    python_path_ = new std::string(lines_of(install.output).back());
    reference();
    const auto r =
        run_command(tool("tandem-import") + " --from " + model_dir() + " --out " + imported());
    ASSERT_EQ(r.exit_code, 0) << r.output;
    ASSERT_NE(r.output.find("2+2 layers, d_model 32, 4 heads, d_ff 64, swish"), std::string::npos)
        << r.output;
    ref_ = new json(json::parse(read_text(file("ref/reference.json"))));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete python_path_;
    delete ref_;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string model_dir() { return file("ref/model"); }
  static std::string imported() { return file("imported.h5"); }

  static void reference() {
    const char* python = std::getenv("PYTHON");
    const auto r = run_command(
        "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib PYTHONPATH=" + *python_path_ +
        " " + (python != nullptr ? python : "python3") + " -S " + TANDEM_TESTS_DIR +
        "/e2e/marian_reference.py " + file("ref") + " " + file("train.src") + " " +
        file("train.tgt") + " " + file("test.src") + " " + file("test.tgt") + " " +
        std::to_string(kMaxNewTokens));
    ASSERT_EQ(r.exit_code, 0) << r.output;
  }

  // Marian's id of each Tandem id, through the piece texts (vocab.json against the checkpoint's).
  static std::vector<int64_t> marian_ids(const data::Vocab& vocab) {
    const json pieces = json::parse(read_text(model_dir() + "/vocab.json"));
    const json config = json::parse(read_text(model_dir() + "/config.json"));
    std::vector<int64_t> out(vocab.size());
    for (int64_t id = 0; id < vocab.size(); ++id) {
      out[id] = id == kPadId || id == kBosId ? config["pad_token_id"].get<int64_t>()
                : id == kEosId               ? config["eos_token_id"].get<int64_t>()
                                             : pieces.at(vocab.piece(id)).get<int64_t>();
    }
    return out;
  }

  static TempDir* dir_;
  static std::string* python_path_;
  static json* ref_;
};
TempDir* Import::dir_ = nullptr;
std::string* Import::python_path_ = nullptr;
json* Import::ref_ = nullptr;

TEST_F(Import, TokenizesRawTextAsMarianTokenizerDoes) {
  const auto vocab = data::Vocab::from_bytes(checkpoint::load_description(imported()).vocab);
  ASSERT_TRUE(vocab.paired());
  const auto to_marian = marian_ids(vocab);
  const auto src = lines_of(read_text(file("test.src")));
  const auto tgt = lines_of(read_text(file("test.tgt")));
  ASSERT_EQ(src.size(), (*ref_)["src_ids"].size());
  for (size_t i = 0; i < src.size(); ++i) {
    for (const auto& [text, side, key] : {std::tuple{src[i], data::Side::kSource, "src_ids"},
                                          std::tuple{tgt[i], data::Side::kTarget, "tgt_ids"}}) {
      std::vector<int64_t> ids;
      for (const int32_t id : vocab.encode(text, side)) ids.push_back(to_marian[id]);
      ids.push_back(to_marian[kEosId]);
      EXPECT_EQ(ids, (*ref_)[key][i].get<std::vector<int64_t>>()) << key << " line " << i;
    }
  }
}

TEST_F(Import, TeacherForcedLogProbabilitiesAreTheHuggingFaceModels) {
  auto model = checkpoint::load_for_inference(imported(), checkpoint::Weights::kRaw);
  const auto to_marian = marian_ids(model.vocab);
  std::map<int64_t, int64_t> to_tandem;
  for (int64_t id = static_cast<int64_t>(to_marian.size()) - 1; id >= 0; --id) {
    to_tandem[to_marian[id]] = id;  // the lowest Tandem id of each: pad → <pad>, never <s>
  }
  torch::NoGradGuard no_grad;
  model.model->eval();
  double worst = 0.0;
  int64_t tokens = 0;
  for (size_t i = 0; i < (*ref_)["src_ids"].size(); ++i) {
    std::vector<int64_t> src, tgt_in = {kBosId};
    for (const int64_t id : (*ref_)["src_ids"][i]) src.push_back(to_tandem.at(id));
    for (const int64_t id : (*ref_)["tgt_ids"][i]) tgt_in.push_back(to_tandem.at(id));
    tgt_in.pop_back();  // its EOS is the last target, never an input
    const auto logits =
        model.model->forward(torch::tensor(src).unsqueeze(0), torch::tensor(tgt_in).unsqueeze(0));
    const auto logp = torch::log_softmax(logits[0].to(torch::kDouble), -1);
    const auto& expected = (*ref_)["logprobs"][i];
    ASSERT_EQ(static_cast<int64_t>(expected.size()), logp.size(0));
    for (int64_t t = 0; t < logp.size(0); ++t) {
      const int64_t target = to_tandem.at((*ref_)["tgt_ids"][i][t].get<int64_t>());
      const double ours = logp[t][target].item<double>(), theirs = expected[t].get<double>();
      worst = std::max(worst, std::abs(ours - theirs) / std::abs(theirs));
      ++tokens;
    }
  }
  std::printf(
      "teacher-forced log-probabilities: largest relative difference %.3g over %lld tokens\n",
      worst, static_cast<long long>(tokens));
  EXPECT_GT(tokens, 200);
  EXPECT_LE(worst, 1e-5) << "the largest relative difference over " << tokens << " tokens";
}

TEST_F(Import, GreedyTranslationsAreTheHuggingFaceModels) {
  const auto r =
      run_command(tool("tandem-decode") + " --checkpoint " + imported() +
                  " --beam 1 --max-len-a 0 --max-len-b " + std::to_string(kMaxNewTokens - 1) +
                  " < " + file("test.src") + " 2>" + file("decode.err"));
  ASSERT_EQ(r.exit_code, 0) << read_text(file("decode.err"));
  const auto ours = lines_of(r.output);
  const auto& theirs = (*ref_)["greedy"];
  ASSERT_EQ(ours.size(), theirs.size());
  std::set<std::string> distinct;
  for (size_t i = 0; i < ours.size(); ++i) {
    EXPECT_EQ(ours[i], theirs[i].get<std::string>()) << "line " << i;
    distinct.insert(ours[i]);
  }
  EXPECT_GT(distinct.size(), 5u) << "the random model says one thing to every line";
}

// pytorch_model.bin (torch.save's zip of pickled tensors) gives the same checkpoint as
// model.safetensors of the same weights.
TEST_F(Import, APickledStateDictImportsLikeSafetensors) {
  const auto r = run_command(tool("tandem-import") + " --from " + model_dir() + "-bin --out " +
                             file("from-bin.h5"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  expect_same_model_bitwise(imported(), file("from-bin.h5"));
}

// tandem-export --to huggingface of the import writes the original folder back: every tensor
// of its model.safetensors, equal (MarianMT's own id order restored), its vocab.json and
// SentencePiece models; and tandem-import of what it wrote is the import, bit for bit.
TEST_F(Import, AHuggingFaceExportOfTheImportIsTheOriginalAndImportsBackBitwise) {
  const std::string out = file("exported-hf");
  const auto exported = run_command(tool("tandem-export") + " --checkpoint " + imported() +
                                    " --to huggingface --out " + out);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  expect_same_tensors(importer::read_safetensors(model_dir() + "/model.safetensors"),
                      importer::read_safetensors(out + "/model.safetensors"));
  EXPECT_EQ(json::parse(read_text(out + "/vocab.json")),
            json::parse(read_text(model_dir() + "/vocab.json")));
  for (const char* spm : {"/source.spm", "/target.spm"}) {
    EXPECT_EQ(read_text(out + spm), read_text(model_dir() + spm)) << spm;
  }
  const auto config = json::parse(read_text(out + "/config.json"));
  const auto original_config = json::parse(read_text(model_dir() + "/config.json"));
  for (const char* key : {"pad_token_id", "eos_token_id", "decoder_start_token_id", "vocab_size"}) {
    EXPECT_EQ(config[key], original_config[key]) << key;
  }
  const auto again = run_command(tool("tandem-import") + " --from " + out + " --out " +
                                 file("reimported.h5"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_model_bitwise(imported(), file("reimported.h5"));
}

// The imported model fine-tuned on 2 ranks from a corpus binarized with its vocabulary: the loss
// falls, stopping and resuming gives the uninterrupted run's weights bit for bit, and the result
// evaluates and decodes.
TEST_F(Import, FineTunesOnTwoRanksResumesBitwiseEvaluatesAndDecodes) {
  const auto prep =
      run_command(tool("tandem-prep") + " --vocab-from " + imported() + " --train-src " +
                  file("train.src") + " --train-tgt " + file("train.tgt") + " --test-src " +
                  file("test.src") + " --test-tgt " + file("test.tgt") + " --out " + file("ft.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  auto config = [&](const std::string& run) {
    const std::string path = file(run + ".yaml");
    write_file(path,
               "model: {d_model: 32, heads: 4, encoder_layers: 2, decoder_layers: 2, "
               "d_ff: 64, dropout: 0.1, tie_embeddings: true, activation: swish, "
               "positions: halves, max_positions: 128}\n"
               "data: {corpus: " +
                   file("ft.h5") +
                   ", max_tokens: 512, seed: 3}\n"
                   "train: {max_steps: 12, lr: 0.001, schedule: constant, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   file(run) +
                   ", every_steps: 6, keep_last: 0}\n"
                   "log: {every_steps: 1}\n");
    return path;
  };
  const std::string from = " --resume " + imported() + " --reset-optimizer --reset-data";
  const auto straight =
      run_command(mpirun(2) + tool("tandem-train") + " --config " + config("straight") + from);
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto first = run_command(mpirun(2) + tool("tandem-train") + " --config " + config("split") +
                                 from + " --set train.max_steps=6");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second =
      run_command(mpirun(2) + tool("tandem-train") + " --config " + config("split"));
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("at step 6"), std::string::npos) << second.output;

  std::vector<double> losses;
  for (const auto& line : lines_of(read_text(file("straight/metrics.jsonl")))) {
    const auto j = json::parse(line);
    if (j.contains("loss")) losses.push_back(j["loss"].get<double>());
  }
  ASSERT_GE(losses.size(), 12u);
  EXPECT_LT((losses[9] + losses[10] + losses[11]) / 3, (losses[0] + losses[1] + losses[2]) / 3);

  const auto a = checkpoint::load(file("straight/last.h5"));
  const auto b = checkpoint::load(file("split/last.h5"));
  ASSERT_EQ(a.step, 12);
  ASSERT_EQ(b.step, 12);
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(a.model[i].second, b.model[i].second)) << a.model[i].first;
  }

  const auto eval =
      run_command(tool("tandem-eval") + " --checkpoint " + file("split/last.h5") + " --split test");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("BLEU"), std::string::npos) << eval.output;
  const auto decode = run_command(tool("tandem-decode") + " --checkpoint " + file("split/last.h5") +
                                  " < " + file("test.src") + " 2>/dev/null");
  ASSERT_EQ(decode.exit_code, 0) << decode.output;
  EXPECT_EQ(lines_of(decode.output).size(), lines_of(read_text(file("test.src"))).size());
}

// The multilingual fine-tune's config: the imported layout's shape, 6 steps on `corpus`.
std::string multilingual_fine_tune(const std::string& corpus, const std::string& dir) {
  return "model: {d_model: 32, heads: 4, encoder_layers: 2, decoder_layers: 2, d_ff: 64, "
         "dropout: 0.1, tie_embeddings: true, activation: swish, positions: halves, "
         "max_positions: 128}\n"
         "data: {corpus: " +
         corpus +
         ", max_tokens: 512, seed: 3}\n"
         "train: {max_steps: 6, lr: 0.001, seed: 5, threads: 1}\n"
         "checkpoint: {dir: " +
         dir +
         ", every_steps: 6}\n"
         "log: {every_steps: 3}\n";
}

// A multilingual OPUS-MT layout (>>a<< and >>b<< in vocab.json): a tagged line tokenizes as
// MarianTokenizer's; the model fine-tunes on both directions of a tandem-prep --corpora file made
// with its vocabulary, whose sources start with the tags' own ids; the fine-tuned checkpoint keeps
// the vocabulary, and tandem-decode --target-lang gives what the typed tag gives.
TEST_F(Import, AMultilingualLayoutFineTunesOnTaggedTextAndKeepsItsTags) {
  const std::string vocab_bytes = checkpoint::load_description(imported()).vocab;
  const auto vocab = data::Vocab::from_bytes(vocab_bytes);
  EXPECT_EQ(vocab.language_tags(), (std::vector<std::string>{">>a<<", ">>b<<"}));
  const auto to_marian = marian_ids(vocab);
  const auto src = lines_of(read_text(file("test.src")));
  ASSERT_EQ(src.size(), (*ref_)["tagged_src_ids"].size());
  for (size_t i = 0; i < src.size(); ++i) {
    std::vector<int64_t> ids;
    for (const int32_t id : vocab.encode(">>a<< " + src[i], data::Side::kSource)) {
      ids.push_back(to_marian[id]);
    }
    ids.push_back(to_marian[kEosId]);
    EXPECT_EQ(ids, (*ref_)["tagged_src_ids"][i].get<std::vector<int64_t>>()) << "line " << i;
  }

  write_file(file("multi.yaml"),
             "corpora:\n"
             "  - {name: fw, src_lang: a, tgt_lang: b, train: {src: train.src, tgt: train.tgt},\n"
             "     test: {src: test.src, tgt: test.tgt}}\n"
             "  - {name: bw, src_lang: b, tgt_lang: a, train: {src: train.tgt, tgt: train.src},\n"
             "     test: {src: test.tgt, tgt: test.src}}\n");
  const auto prep = run_command(tool("tandem-prep") + " --corpora " + file("multi.yaml") +
                                " --vocab-from " + imported() + " --out " + file("multi.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const data::Corpus multi(file("multi.h5"));
  const auto pairs = multi.read("test", {0, static_cast<int64_t>(src.size())});
  EXPECT_EQ(pairs[0].src.front(), vocab.tag_id(">>b<<"));  // fw: into b
  EXPECT_EQ(pairs[1].src.front(), vocab.tag_id(">>a<<"));  // bw: into a

  write_file(file("multi-ft.yaml"), multilingual_fine_tune(file("multi.h5"), file("multi-ft")));
  const auto train = run_command(mpirun(2) + tool("tandem-train") + " --config " +
                                 file("multi-ft.yaml") + " --resume " + imported() +
                                 " --reset-optimizer --reset-data");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find("by corpus: fw "), std::string::npos) << train.output;
  const std::string tuned = file("multi-ft/last.h5");
  EXPECT_EQ(checkpoint::load_description(tuned).vocab, vocab_bytes);

  write_file(file("tagged-b.txt"), ">>b<< " + src[0] + "\n>>b<< " + src[1] + "\n");
  write_file(file("plain.txt"), src[0] + "\n" + src[1] + "\n");
  const std::string decode = tool("tandem-decode") + " --checkpoint " + tuned + " --beam 2";
  const auto chosen =
      run_command(decode + " --target-lang b < " + file("plain.txt") + " 2>/dev/null");
  const auto typed = run_command(decode + " < " + file("tagged-b.txt") + " 2>/dev/null");
  ASSERT_EQ(chosen.exit_code, 0) << chosen.output;
  ASSERT_EQ(typed.exit_code, 0) << typed.output;
  EXPECT_EQ(lines_of(chosen.output).size(), 2u);
  EXPECT_EQ(chosen.output, typed.output);
}

void edit_config(const std::string& dir, const std::string& key, const json& value) {
  edit_json(dir + "/config.json", [&](json& config) { config[key] = value; });
}

TEST_F(Import, BadInputExitsTwoWithOneLineAndWritesNothing) {
  const std::string good = model_dir(), out = file("refused.h5");
  expect_refused(file("test.src"), out, "is not a folder");
  expect_refused(variant(good, file("no-config"),
                         [](const std::string& d) { fs::remove(d + "/config.json"); }),
                 out, "no config.json");
  expect_refused(variant(good, file("bert"),
                         [](const std::string& d) { edit_config(d, "model_type", "bert"); }),
                 out, "model_type = \"bert\"");
  expect_refused(
      variant(good, file("gelu"),
              [](const std::string& d) { edit_config(d, "activation_function", "gelu"); }),
      out, "activation_function = \"gelu\"");
  expect_refused(variant(good, file("prenorm"),
                         [](const std::string& d) { edit_config(d, "normalize_before", true); }),
                 out, "normalize_before = true");
  expect_refused(variant(good, file("untied"),
                         [](const std::string& d) {
                           edit_config(d, "share_encoder_decoder_embeddings", false);
                         }),
                 out, "share_encoder_decoder_embeddings = false");
  expect_refused(
      variant(good, file("no-spm"), [](const std::string& d) { fs::remove(d + "/target.spm"); }),
      out, "no target.spm");
  expect_refused(variant(good, file("no-weights"),
                         [](const std::string& d) { fs::remove(d + "/model.safetensors"); }),
                 out, "none of model.safetensors, pytorch_model.bin");
  expect_refused(variant(good, file("small-vocab"),
                         [](const std::string& d) {
                           edit_config(d, "vocab_size", 100);
                           edit_config(d, "decoder_vocab_size", 100);
                         }),
                 out, "vocab.json");

  // An existing --out is kept as it was.
  write_file(out, "precious");
  const auto r = run_command(tool("tandem-import") + " --from " + good + " --out " + out);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(read_text(out), "precious");
}

}  // namespace
}  // namespace tandem::test
