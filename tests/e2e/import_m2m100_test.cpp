// tandem-import of the M2M-100 family against Hugging Face transformers itself (its pinned Python
// package from launch/transformers.sh): small M2M100ForConditionalGeneration models with random
// weights in the NLLB-200 layout (NllbTokenizer, weights in shards) and the M2M-100 layout
// (M2M100Tokenizer with its vocab.json), each with a SentencePiece BPE model trained on Bible text
// here, built and run by tests/e2e/m2m100_reference.py and imported by the real tool; then
// tokenization, teacher-forced log-probabilities, greedy and beam-4 translations with the target's
// code forced first, and bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <regex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/vocab/vocab.h"
#include "tests/e2e/bible_text.h"
#include "tests/e2e/import_checks.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/temp_dir.h"
#include "trainer/common/token_ids.h"
#include "trainer/import/hf_folder.h"
#include "trainer/model_io/model_io.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kMaxNewTokens = 20;  // the target's code included

// One layout: the reference's KIND, the languages in its own codes.
struct Layout {
  const char* kind;
  const char* src_lang;
  const char* tgt_lang;
  size_t codes;  // how many language codes its tokenizer has
};

std::ostream& operator<<(std::ostream& out, const Layout& l) { return out << l.kind; }

// The Bible text both layouts share.
const BibleText& bible_text() {
  static const BibleText text("m2m100-bible");
  return text;
}

class ImportM2M100 : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    const Layout& l = GetParam();
    auto& cache = prepared();
    if (!cache.count(l.kind)) cache[l.kind] = prepare(l);
    ASSERT_FALSE(cache[l.kind].empty()) << "the reference or the import failed above";
    ref_ = json::parse(read_text(out_dir() + "/ref/reference.json"));
  }

  static std::map<std::string, std::string>& prepared() {
    static std::map<std::string, std::string> done;  // kind -> its folder, "" when it failed
    return done;
  }

  // Builds the reference model and imports it; "" (with the failure reported) if either fails.
  static std::string prepare(const Layout& l) {
    const BibleText& bible = bible_text();
    const std::string out = bible.file(l.kind);
    const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/transformers.sh");
    EXPECT_EQ(install.exit_code, 0) << install.output;
    if (install.exit_code != 0) return "";
    const char* python = std::getenv("PYTHON");
    const auto r = run_command(
        "LD_LIBRARY_PATH=/usr/local/cuda/lib64:/usr/local/cuda/lib PYTHONPATH=" +
        lines_of(install.output).back() + " " + (python != nullptr ? python : "python3") + " -S " +
        TANDEM_TESTS_DIR + "/e2e/m2m100_reference.py " + out + "/ref " + l.kind + " " +
        bible.file("text.txt") + " " + bible.file("test.src") + " " + bible.file("test.tgt") + " " +
        l.src_lang + " " + l.tgt_lang + " " + bible.file("raw.txt") + " " +
        std::to_string(kMaxNewTokens));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    if (r.exit_code != 0) return "";
    const auto imported = run_command(tool("tandem-import") + " --from " + out +
                                      "/ref/model --out " + out + "/imported.h5");
    EXPECT_EQ(imported.exit_code, 0) << imported.output;
    if (imported.exit_code != 0) return "";
    EXPECT_NE(imported.output.find("2+2 layers, d_model 32, 4 heads, d_ff 64, relu, pre-norm"),
              std::string::npos)
        << imported.output;
    return out;
  }

  std::string out_dir() const { return bible_text().file(GetParam().kind); }
  std::string imported() const { return out_dir() + "/imported.h5"; }
  std::string model_dir() const { return out_dir() + "/ref/model"; }
  std::string bible(const std::string& name) const { return bible_text().file(name); }
  std::string languages() const {
    return std::string(" --source-lang ") + GetParam().src_lang + " --target-lang " +
           GetParam().tgt_lang;
  }

  // The model's id of a Tandem id: the ids are the model's but for the four specials (pad 0 is
  // its 1, unk 1 its 3, the decoder's start 2 and eos 3 its </s> 2) and its <s> (0), last.
  static int64_t model_id(const data::Vocab& vocab, int32_t id) {
    static const int64_t kSpecials[] = {1, 3, 2, 2};
    if (id <= kEosId) return kSpecials[id];
    if (id == vocab.size() - 1 && vocab.piece(id) == "<model <s>>") return 0;
    return id;
  }
  static std::map<int64_t, int32_t> tandem_ids(const data::Vocab& vocab) {
    std::map<int64_t, int32_t> out;
    for (int32_t id = static_cast<int32_t>(vocab.size()) - 1; id >= 0; --id) {
      out[model_id(vocab, id)] = id;  // the lowest Tandem id of each: </s> → eos 3, never 2
    }
    out[2] = kEosId;
    return out;
  }

  json ref_;
};

TEST_P(ImportM2M100, KeepsTheModelsIdsAndLanguageCodes) {
  const auto vocab = data::Vocab::from_bytes(checkpoint::load_description(imported()).vocab);
  ASSERT_TRUE(vocab.paired());
  EXPECT_EQ(vocab.language_codes().size(), GetParam().codes);
  EXPECT_EQ(vocab.code_id(GetParam().tgt_lang), ref_["code"].get<int64_t>());
  EXPECT_EQ(vocab.code_id("xx_Nope"), -1);
  const auto config = json::parse(read_text(model_dir() + "/config.json"));
  EXPECT_EQ(vocab.size(), config["vocab_size"].get<int64_t>() + 1);  // <s> moved last
}

TEST_P(ImportM2M100, TokenizesRawTextAsTheTokenizerDoes) {
  const auto vocab = data::Vocab::from_bytes(checkpoint::load_description(imported()).vocab);
  const int32_t src_code = vocab.code_id(GetParam().src_lang);
  const int32_t tgt_code = vocab.code_id(GetParam().tgt_lang);
  ASSERT_GE(src_code, 0);
  auto ids_of = [&](int32_t code, const std::string& text, data::Side side) {
    std::vector<int64_t> ids = {model_id(vocab, code)};
    for (const int32_t id : vocab.encode(text, side)) ids.push_back(model_id(vocab, id));
    ids.push_back(model_id(vocab, kEosId));
    return ids;
  };
  const auto src = lines_of(read_text(bible("test.src")));
  const auto tgt = lines_of(read_text(bible("test.tgt")));
  const auto raw = lines_of(read_text(bible("raw.txt")));
  ASSERT_EQ(src.size(), ref_["src_ids"].size());
  ASSERT_EQ(raw.size(), ref_["raw_ids"].size());
  int64_t unknown = 0;
  for (size_t i = 0; i < src.size(); ++i) {
    EXPECT_EQ(ids_of(src_code, src[i], data::Side::kSource),
              ref_["src_ids"][i].get<std::vector<int64_t>>())
        << "source line " << i;
    EXPECT_EQ(ids_of(tgt_code, tgt[i], data::Side::kTarget),
              ref_["tgt_ids"][i].get<std::vector<int64_t>>())
        << "target line " << i;
  }
  for (size_t i = 0; i < raw.size(); ++i) {
    const auto ours = ids_of(src_code, raw[i], data::Side::kSource);
    EXPECT_EQ(ours, ref_["raw_ids"][i].get<std::vector<int64_t>>()) << "raw line " << i;
    unknown += std::count(ours.begin(), ours.end(), 3);
  }
  EXPECT_GT(unknown, 0) << "no raw line has a character the vocabulary lacks";
}

TEST_P(ImportM2M100, TeacherForcedLogProbabilitiesAreTheHuggingFaceModels) {
  auto model = checkpoint::load_for_inference(imported(), checkpoint::Weights::kRaw);
  const auto to_tandem = tandem_ids(model.vocab);
  torch::NoGradGuard no_grad;
  model.model->eval();
  double worst = 0.0;
  int64_t tokens = 0;
  for (size_t i = 0; i < ref_["src_ids"].size(); ++i) {
    std::vector<int64_t> src, tgt_in = {kBosId};
    for (const int64_t id : ref_["src_ids"][i]) src.push_back(to_tandem.at(id));
    for (const int64_t id : ref_["tgt_ids"][i]) tgt_in.push_back(to_tandem.at(id));
    tgt_in.pop_back();  // its EOS is the last target, never an input
    const auto logits =
        model.model->forward(torch::tensor(src).unsqueeze(0), torch::tensor(tgt_in).unsqueeze(0));
    const auto logp = torch::log_softmax(logits[0].to(torch::kDouble), -1);
    const auto& expected = ref_["logprobs"][i];
    ASSERT_EQ(static_cast<int64_t>(expected.size()), logp.size(0));
    for (int64_t t = 0; t < logp.size(0); ++t) {
      const int64_t target = to_tandem.at(ref_["tgt_ids"][i][t].get<int64_t>());
      const double ours = logp[t][target].item<double>(), theirs = expected[t].get<double>();
      worst = std::max(worst, std::abs(ours - theirs) / std::abs(theirs));
      ++tokens;
    }
  }
  std::printf(
      "%s teacher-forced log-probabilities: largest relative difference %.3g over %lld "
      "tokens\n",
      GetParam().kind, worst, static_cast<long long>(tokens));
  EXPECT_GT(tokens, 300);
  EXPECT_LE(worst, 1e-5) << "the largest relative difference over " << tokens << " tokens";
}

TEST_P(ImportM2M100, GreedyAndBeamFourAreGeneratesWithTheCodeForced) {
  std::set<std::string> distinct;
  for (const auto& [beam, key] : {std::pair{1, "greedy"}, std::pair{4, "beam4"}}) {
    const auto r = run_command(tool("tandem-decode") + " --checkpoint " + imported() + languages() +
                               " --beam " + std::to_string(beam) + " --max-len-a 0 --max-len-b " +
                               std::to_string(kMaxNewTokens) + " --min-len 0 < " +
                               bible("test.src") + " 2>" + out_dir() + "/decode.err");
    ASSERT_EQ(r.exit_code, 0) << read_text(out_dir() + "/decode.err");
    const auto ours = lines_of(r.output);
    const auto& theirs = ref_[key];
    ASSERT_EQ(ours.size(), theirs.size()) << key;
    for (size_t i = 0; i < ours.size(); ++i) {
      EXPECT_EQ(ours[i], theirs[i]["text"].get<std::string>()) << key << " line " << i;
      distinct.insert(ours[i]);
    }
  }
  EXPECT_GT(distinct.size(), 5u) << "the random model says one thing to every line";
}

// The NLLB layout's own refusals: a shard missing, an index that lists a tensor another shard
// holds, a tokenizer that lists no language codes.
void expect_bad_shards_and_codes_refused(const std::string& good,
                                         const std::function<std::string(const std::string&)>& at,
                                         const std::string& out) {
  // Shards: one missing, one whose index lists a tensor another shard holds.
  const std::string index = good + "/model.safetensors.index.json";
  const auto map = json::parse(read_text(index))["weight_map"];
  const std::string first = map.begin().value().get<std::string>();
  std::string other;
  for (const auto& [name, shard] : map.items()) {
    if (shard.get<std::string>() != first) other = shard.get<std::string>();
  }
  ASSERT_FALSE(other.empty()) << "the reference wrote one shard";
  expect_refused(
      variant(good, at("lost-shard"), [&](const std::string& d) { fs::remove(d + "/" + first); }),
      out, "shard '" + first + "'");
  expect_refused(variant(good, at("moved-tensor"),
                         [&](const std::string& d) {
                           edit_json(d + "/model.safetensors.index.json",
                                     [&](json& j) { j["weight_map"][map.begin().key()] = other; });
                         }),
                 out, "model.safetensors.index.json");
  // A tokenizer that lists no language codes.
  expect_refused(variant(good, at("no-codes"),
                         [](const std::string& d) {
                           edit_json(d + "/tokenizer_config.json", [](json& j) {
                             j.erase("extra_special_tokens");
                             j.erase("additional_special_tokens");
                           });
                         }),
                 out, "no language codes");
}

// M2M-100's: no vocabulary, and language codes of no kind it knows.
void expect_bad_vocabularies_refused(const std::string& good,
                                     const std::function<std::string(const std::string&)>& at,
                                     const std::string& out) {
  expect_refused(variant(good, at("no-vocab"),
                         [](const std::string& d) {
                           fs::remove(d + "/vocab.json");
                           edit_json(d + "/tokenizer_config.json",
                                     [](json& j) { j.erase("tokenizer_class"); });
                         }),
                 out, "tokenizer");
  expect_refused(variant(good, at("codes"),
                         [](const std::string& d) {
                           edit_json(d + "/tokenizer_config.json",
                                     [](json& j) { j["language_codes"] = "klingon"; });
                         }),
                 out, "language_codes = \"klingon\"");
}

// An unknown language: exit 2 naming the nearest codes the model has; none given, exit 2 too.
void expect_an_unknown_or_missing_language_refused(const std::string& imported,
                                                   const std::string& kind,
                                                   const std::string& src_lang,
                                                   const std::string& tgt_lang) {
  const std::string typo = kind == "nllb" ? "eng_Latm" : "enn";
  const auto r = run_command("echo hello | " + tool("tandem-decode") + " --checkpoint " + imported +
                             " --source-lang " + typo + " --target-lang " + tgt_lang);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find("--source-lang '" + typo + "'"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(src_lang), std::string::npos) << r.output;
  const auto none = run_command("echo hello | " + tool("tandem-decode") + " --checkpoint " +
                                imported + " --target-lang " + tgt_lang);
  EXPECT_EQ(none.exit_code, 2) << none.output;
  EXPECT_NE(none.output.find("--source-lang is needed"), std::string::npos) << none.output;
}

TEST_P(ImportM2M100, BadInputExitsTwoWithOneLineAndWritesNothing) {
  const std::string good = model_dir(), out = out_dir() + "/refused.h5";
  auto at = [&](const std::string& name) { return out_dir() + "/bad-" + name; };
  auto config = [](const std::string& key, const json& value) {
    return [key, value](const std::string& d) {
      edit_json(d + "/config.json", [&](json& j) { j[key] = value; });
    };
  };
  // A config that lies about its shapes: the weights' file and tensor are named.
  expect_refused(variant(good, at("wide"), config("d_model", 64)), out, "has shape");
  expect_refused(variant(good, at("deep"), config("encoder_layers", 3)), out,
                 "encoder.layers.2.self_attn.q_proj.weight");
  expect_refused(variant(good, at("postnorm"), config("scale_embedding", false)), out,
                 "scale_embedding = false");
  expect_refused(variant(good, at("gelu"), config("activation_function", "gelu")), out,
                 "activation_function = \"gelu\"");
  expect_refused(variant(good, at("start"), config("decoder_start_token_id", 0)), out,
                 "decoder_start_token_id = 0");
  expect_refused(variant(good, at("no-spm"),
                         [](const std::string& d) { fs::remove(d + "/sentencepiece.bpe.model"); }),
                 out, "no sentencepiece.bpe.model");
  const std::string kind = GetParam().kind;
  if (kind == "nllb") {
    expect_bad_shards_and_codes_refused(good, at, out);
  } else {
    expect_bad_vocabularies_refused(good, at, out);
  }
  expect_an_unknown_or_missing_language_refused(imported(), kind, GetParam().src_lang,
                                                GetParam().tgt_lang);
}

// What the NLLB layout alone is run for (it stands for both): the fine-tune and the CTranslate2
// export. The same prepared models as ImportM2M100's.
class ImportNllb : public ImportM2M100 {};

// The loss tandem-eval --json reports for `args`.
double eval_loss(const std::string& args) {
  const auto r = run_command(tool("tandem-eval") + " --beam 1 --json " + args + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0 ? json::parse(lines_of(r.output).back())["loss"].get<double>() : 0.0;
}

// The imported NLLB-layout model fine-tunes on 2 ranks (optimizer state sharded) on Bible text in
// both directions, each side starting with its language's code (tandem-prep --corpora with
// --vocab-from the model): the test loss falls, and the target's code picks the direction (the
// reference scores better after the right code than after the other, and the translations
// differ).
// The corpora manifest of both directions of the Bible text in `dir` (ft.en, ft.es), with the
// test split each way.
void write_both_directions(const std::string& dir, const std::string& test_src,
                           const std::string& test_tgt) {
  write_file(dir + "/both.yaml",
             "corpora:\n"
             "  - {name: en-es, src_lang: eng_Latn, tgt_lang: spa_Latn,\n"
             "     train: {src: " +
                 dir + "/ft.en, tgt: " + dir +
                 "/ft.es},\n"
                 "     test: {src: " +
                 test_src + ", tgt: " + test_tgt +
                 "}}\n"
                 "  - {name: es-en, src_lang: spa_Latn, tgt_lang: eng_Latn,\n"
                 "     train: {src: " +
                 dir + "/ft.es, tgt: " + dir +
                 "/ft.en},\n"
                 "     test: {src: " +
                 test_tgt + ", tgt: " + test_src + "}}\n");
}

// Each side of a prepared pair starts with its language's code (the imported model's ids), the
// source's text after it as the vocabulary encodes it.
void expect_codes_start_each_side(const std::string& imported, const std::string& corpus_path,
                                  const std::string& test_src) {
  const auto vocab = data::Vocab::from_bytes(checkpoint::load_description(imported).vocab);
  const int32_t eng = vocab.code_id("eng_Latn"), spa = vocab.code_id("spa_Latn");
  const data::Corpus corpus(corpus_path);
  const auto* forward = corpus.directions().find("en-es");
  const auto* backward = corpus.directions().find("es-en");
  ASSERT_TRUE(forward != nullptr && backward != nullptr);
  const auto pairs =
      corpus.read("test", {forward->range("test")->first, backward->range("test")->first});
  EXPECT_EQ(pairs[0].src.front(), eng);
  EXPECT_EQ(pairs[0].tgt.front(), spa);
  EXPECT_EQ(pairs[1].src.front(), spa);
  EXPECT_EQ(pairs[1].tgt.front(), eng);
  EXPECT_EQ(std::vector<int32_t>(pairs[0].src.begin() + 1, pairs[0].src.end()),
            vocab.encode(lines_of(read_text(test_src))[0], data::Side::kSource));
}

// The fine-tune's config: the reference's shape, 200 steps, the optimizer state sharded.
void write_fine_tune_config(const std::string& dir) {
  write_file(dir + "/ft.yaml",
             "model: {d_model: 32, heads: 4, encoder_layers: 2, decoder_layers: 2, d_ff: 64, "
             "dropout: 0.0, pre_norm: true, tie_embeddings: true, activation: relu, "
             "positions: fairseq, max_positions: 128}\n"
             "data: {corpus: " +
                 dir +
                 "/both.h5, max_tokens: 1024, seed: 3}\n"
                 "train: {max_steps: 200, lr: 0.002, schedule: constant, seed: 5, threads: 1}\n"
                 "dist: {shard_optimizer: true}\n"
                 "checkpoint: {dir: " +
                 dir +
                 "/ft, every_steps: 200}\n"
                 "log: {every_steps: 10}\n");
}

// The target's code picks the direction: the reference scores better after the right code than
// after the other, and the translations differ.
void expect_the_target_code_picks_the_direction(const std::string& tuned,
                                                const std::string& test_src,
                                                const std::string& test_tgt) {
  const std::string files = " --src " + test_src + " --ref " + test_tgt;
  const double right =
      eval_loss("--checkpoint " + tuned + files + " --source-lang eng_Latn --target-lang spa_Latn");
  const double wrong =
      eval_loss("--checkpoint " + tuned + files + " --source-lang eng_Latn --target-lang eng_Latn");
  std::printf("Spanish references after spa_Latn: loss %.4f; after eng_Latn: %.4f\n", right, wrong);
  EXPECT_LT(right, wrong - 0.1);
  const std::string decode = tool("tandem-decode") + " --checkpoint " + tuned +
                             " --beam 2 --source-lang eng_Latn --target-lang ";
  const auto into_es = run_command(decode + "spa_Latn < " + test_src + " 2>/dev/null");
  const auto into_en = run_command(decode + "eng_Latn < " + test_src + " 2>/dev/null");
  ASSERT_EQ(into_es.exit_code, 0) << into_es.output;
  ASSERT_EQ(into_en.exit_code, 0) << into_en.output;
  const auto a = lines_of(into_es.output), b = lines_of(into_en.output);
  ASSERT_EQ(a.size(), b.size());
  size_t differ = 0;
  for (size_t i = 0; i < a.size(); ++i) differ += a[i] != b[i] ? 1 : 0;
  EXPECT_GT(differ, a.size() / 2);
}

TEST_P(ImportNllb, FineTunesOnTwoRanksInBothDirectionsAndTheTargetCodePicksTheDirection) {
  const auto en = lines_of(read_text(bible("bible/train.en")));
  const auto es = lines_of(read_text(bible("bible/train.es")));
  std::string train_en, train_es;
  for (size_t i = 0; i < 1500; ++i) {
    train_en += en[i] + "\n";
    train_es += es[i] + "\n";
  }
  const std::string dir = out_dir();
  write_file(dir + "/ft.en", train_en);
  write_file(dir + "/ft.es", train_es);
  const std::string test_src = bible("test.src"), test_tgt = bible("test.tgt");
  write_both_directions(dir, test_src, test_tgt);
  const auto prep = run_command(tool("tandem-prep") + " --corpora " + dir + "/both.yaml" +
                                " --vocab-from " + imported() + " --out " + dir + "/both.h5");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  expect_codes_start_each_side(imported(), dir + "/both.h5", test_src);
  write_fine_tune_config(dir);
  const auto train =
      run_command(mpirun(2) + tool("tandem-train") + " --config " + dir + "/ft.yaml --resume " +
                  imported() + " --reset-optimizer --reset-data");
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_NE(train.output.find("optimizer state sharded over 2 ranks"), std::string::npos)
      << train.output;
  const std::string tuned = dir + "/ft/last.h5";
  EXPECT_EQ(checkpoint::load_description(tuned).vocab,
            checkpoint::load_description(imported()).vocab);

  const std::string split = " --split test --corpus " + dir + "/both.h5";
  const double before = eval_loss("--checkpoint " + imported() + split);
  const double after = eval_loss("--checkpoint " + tuned + split);
  std::printf("test loss of both directions: %.4f imported, %.4f after 200 steps\n", before, after);
  EXPECT_LT(after, before - 0.5);

  expect_the_target_code_picks_the_direction(tuned, test_src, test_tgt);

  // Fine-tuned in full, its output bias is no longer zero, and M2M-100's class has none: refused,
  // nothing written.
  const auto exported = run_command(tool("tandem-export") + " --checkpoint " + tuned +
                                    " --to huggingface --out " + dir + "/ft-hf");
  EXPECT_EQ(exported.exit_code, 2) << exported.output;
  EXPECT_EQ(lines_of(exported.output).size(), 1u) << exported.output;
  EXPECT_NE(exported.output.find("output_proj.bias is not zero"), std::string::npos)
      << exported.output;
  EXPECT_FALSE(fs::exists(dir + "/ft-hf"));
}

// CTranslate2 4.x on the CPU (launch/ctranslate2.sh) translates the exported NLLB-layout model,
// each source after its code and the target's code as target_prefix, as tandem-decode does:
// greedy, line for line.
TEST_P(ImportNllb, CTranslate2GivesTandemDecodesGreedyLinesWithTheTargetPrefix) {
  const std::string dir = out_dir(), ct2 = dir + "/ct2";
  const auto exported = run_command(tool("tandem-export") + " --checkpoint " + imported() +
                                    " --to ctranslate2 --force --out " + ct2);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/ctranslate2.sh");
  ASSERT_EQ(install.exit_code, 0) << install.output;
  const char* python = std::getenv("PYTHON");
  const auto r =
      run_command("PYTHONPATH=" + lines_of(install.output).back() + " " +
                  (python != nullptr ? python : "python3") + " " + TANDEM_LAUNCH_DIR +
                  "/ctranslate2-decode.py " + ct2 + " " + bible("test.src") + " " + dir +
                  "/ct2.hyp" + " --beam 1 --min-len 0 --max-len " + std::to_string(kMaxNewTokens) +
                  " --max-input-len 128 --source-prefix " + GetParam().src_lang +
                  " --target-prefix " + GetParam().tgt_lang);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto decode =
      run_command(tool("tandem-decode") + " --checkpoint " + imported() + languages() +
                  " --beam 1 --max-len-a 0 --max-len-b " + std::to_string(kMaxNewTokens) +
                  " --min-len 0 < " + bible("test.src") + " 2>/dev/null");
  ASSERT_EQ(decode.exit_code, 0) << decode.output;
  const auto ours = lines_of(decode.output), theirs = lines_of(read_text(dir + "/ct2.hyp"));
  ASSERT_EQ(ours.size(), theirs.size());
  for (size_t i = 0; i < ours.size(); ++i) EXPECT_EQ(theirs[i], ours[i]) << "line " << i;
}

// A model folder's tensors by name, whatever holds them (safetensors, in shards or not, or
// pytorch_model.bin), with the copies a pickled state dict keeps of the shared embeddings left out.
std::map<std::string, torch::Tensor> folder_tensors(const std::string& dir) {
  std::string file;
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, tensor] : importer::read_weights(dir, &file)) {
    out.emplace(name, tensor.read());
  }
  for (const char* copy : {"model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight",
                           "lm_head.weight"}) {
    if (out.count(copy) && out.count("model.shared.weight")) {
      EXPECT_TRUE(torch::equal(out.at(copy), out.at("model.shared.weight"))) << copy;
      out.erase(copy);
    }
  }
  return out;
}

// tandem-export --to huggingface of the import writes the original folder back: each of its
// tensors (in one safetensors file), and a tokenizer (NllbTokenizer's, M2M100Tokenizer's) that
// tokenizes as the original's; tandem-import of it is the import, bit for bit; transformers runs
// it with the target's code forced (generation_config's forced_bos_token_id from --target-lang)
// and gives the reference's greedy lines, and its teacher-forced NLL is tandem-eval's.
TEST_P(ImportM2M100, AHuggingFaceExportOfTheImportIsTheOriginalAndImportsBackBitwise) {
  const std::string out = out_dir() + "/exported-hf";
  const auto exported = run_command(tool("tandem-export") + " --checkpoint " + imported() +
                                    " --to huggingface --out " + out + languages());
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  expect_same_tensors(folder_tensors(model_dir()), folder_tensors(out));
  const auto again = run_command(tool("tandem-import") + " --from " + out + " --out " + out_dir() +
                                 "/reimported.h5");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  expect_same_model_bitwise(imported(), out_dir() + "/reimported.h5");

  const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/transformers.sh");
  ASSERT_EQ(install.exit_code, 0) << install.output;
  const char* python = std::getenv("PYTHON");
  const auto r = run_command(
      "PYTHONPATH=" + lines_of(install.output).back() + " " +
      (python != nullptr ? python : "python3") + " -S " + TANDEM_TESTS_DIR +
      "/e2e/hf_export_check.py " + out + " " + bible("test.src") + " " + bible("test.tgt") + " " +
      out + ".json --max-new-tokens " + std::to_string(kMaxNewTokens));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const json hf = json::parse(read_text(out + ".json"));
  EXPECT_TRUE(hf["load_notes"].empty()) << hf["load_notes"].dump();
  const auto& greedy = ref_["greedy"];
  ASSERT_EQ(hf["greedy"].size(), greedy.size());
  // M2M100Tokenizer's decode keeps the codes (__es__, and those a random model emits), which the
  // reference's text leaves out.
  const std::regex code("__[a-z]+__ ?");
  for (size_t i = 0; i < greedy.size(); ++i) {
    const std::string text = std::regex_replace(hf["greedy"][i].get<std::string>(), code, "");
    EXPECT_EQ(text, greedy[i]["text"].get<std::string>()) << "line " << i;
  }
  const auto eval = run_command(tool("tandem-eval") + " --checkpoint " + imported() + languages() +
                                " --src " + bible("test.src") + " --ref " + bible("test.tgt") +
                                " --beam 1 --json 2>&1");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const json tandem = json::parse(lines_of(eval.output).back());
  EXPECT_EQ(hf["tokens"], tandem["tokens"]);
  const double loss = tandem["loss"].get<double>();
  EXPECT_NEAR(hf["nll"].get<double>() / hf["tokens"].get<double>(), loss, 1e-5 * loss);
}

const Layout kNllb{"nllb", "eng_Latn", "spa_Latn", 202};

INSTANTIATE_TEST_SUITE_P(Nllb, ImportNllb, ::testing::Values(kNllb),
                         [](const auto& info) { return std::string(info.param.kind); });
INSTANTIATE_TEST_SUITE_P(Layouts, ImportM2M100,
                         ::testing::Values(kNllb, Layout{"m2m100", "en", "es", 100}),
                         [](const auto& info) { return std::string(info.param.kind); });

}  // namespace
}  // namespace tandem::test
