// tandem-export through the real tools, and CTranslate2 itself (its pinned Python package from
// launch/ctranslate2.sh, run by launch/ctranslate2-decode.py) translating what it wrote: checkpoints
// trained here on the synthetic reverse-the-words corpus.
#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "tests/e2e/small_runs.h"
#include "trainer/decode/translate.h"
#include "trainer/model_io/model_io.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

// Tandem's own greedy translations of `lines` with the checkpoint, as tandem-decode makes them (the
// model frozen in fp32), and whether each ended with EOS inside the length limit.
struct TandemGreedy {
  std::vector<std::string> text;
  std::vector<bool> ended;
};
TandemGreedy tandem_greedy(const std::string& checkpoint, checkpoint::Weights weights,
                           const std::vector<std::string>& lines) {
  auto models = checkpoint::load_ensemble({checkpoint}, {}, weights);
  for (auto& member : models.members) member.model->freeze(kernels::InferencePrecision::kFp32);
  const auto& vocab = models.members.front().vocab;
  std::vector<std::vector<int32_t>> sources;
  for (const auto& line : lines) sources.push_back(vocab.encode(line, data::Side::kSource));
  decode::DecodeOptions options;
  options.beam_size = 1;
  TandemGreedy out;
  for (const auto& h : decode::translate(models.ensemble, sources, options)) {
    out.text.push_back(vocab.decode(h.tokens, data::Side::kTarget));
    out.ended.push_back(h.ended);
  }
  return out;
}

class Export : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("export");
    prepare_reverse_corpus(*dir_, 3000, 300);
    const auto install = run_command(std::string(TANDEM_LAUNCH_DIR) + "/ctranslate2.sh");
    ASSERT_EQ(install.exit_code, 0) << install.output;
    python_path_ = new std::string(lines_of(install.output).back());
    // The suite's own tiny run, in four shapes: tied embeddings with a moving average, untied
    // (with guided alignment, shifted: each piece learnt where it is the decoder's input),
    // pre-norm, and Marian's options (swish, positions in halves).
    train("tied", "--set model.tie_embeddings=true --set train.ema_decay=0.99");
    train("untied", "--set model.tie_embeddings=false --set train.alignment.weight=0.5"
                    " --set train.alignment.shift=true");
    train("prenorm", "--set model.pre_norm=true --set model.tie_embeddings=true");
    train("marian", "--set model.tie_embeddings=true --set model.activation=swish"
                    " --set model.positions=halves");
    test_src_ = new std::vector<std::string>(lines_of(read_text(file("test.src"))));
  }
  static void TearDownTestSuite() {
    delete dir_;
    delete python_path_;
    delete test_src_;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string checkpoint(const std::string& name) { return file("run-" + name + "/last.h5"); }

  static void train(const std::string& name, const std::string& flags) {
    train_small_model(*dir_, name, "corpus.h5", 400, flags);
  }

  static CommandResult export_model(const std::string& checkpoint_path, const std::string& out,
                                    const std::string& flags = "") {
    return run_command(tool("tandem-export") + " --checkpoint " + checkpoint_path +
                       " --to ctranslate2 --out " + out + " " + flags);
  }

  // CTranslate2's translations of the test sources (raw text in, detokenized text out), with the
  // length limits the model's position table allows and its own default minimum length (1, as
  // tandem-decode's). `env` goes before the command.
  static std::vector<std::string> ct2_translate(const std::string& model_dir, int beam,
                                                const std::string& flags = "",
                                                const std::string& env = "") {
    const char* python = std::getenv("PYTHON");
    const std::string out = model_dir + ".beam" + std::to_string(beam) + ".hyp";
    const auto r = run_command(
        env + " PYTHONPATH=" + *python_path_ + " " + (python != nullptr ? python : "python3") + " " +
        TANDEM_LAUNCH_DIR + "/ctranslate2-decode.py " + model_dir + " " + file("test.src") + " " +
        out + " --beam " + std::to_string(beam) + " --lenpen 0.6 --max-len 128 " +
        "--max-input-len 128 " + flags);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return lines_of(read_text(out));
  }

  static double bleu_of(const std::string& eval_flags) {
    const auto r = run_command(tool("tandem-eval") + " " + eval_flags + " --ref " +
                               file("test.tgt") + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return last_json_line(r.output)["bleu"].get<double>();
  }

  static void write_lines(const std::string& path, const std::vector<std::string>& lines) {
    std::string text;
    for (const auto& line : lines) text += line + "\n";
    write_file(path, text);
  }

  // Greedy: every line Tandem ended with EOS inside its length limit is CTranslate2's line too.
  // `flags` go to tandem-export and tandem-decode alike.
  static void expect_greedy_identical(const std::string& name, const std::string& flags = "") {
    const bool raw = flags == "--raw-weights";
    const std::string out = file("ct2-" + name + (raw ? "-raw" : ""));
    const auto exported = export_model(checkpoint(name), out, flags);
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    const auto ct2 = ct2_translate(out, 1);
    const auto tandem = tandem_greedy(
        checkpoint(name), raw ? checkpoint::Weights::kRaw : checkpoint::Weights::kAverage,
        *test_src_);
    // tandem-decode itself writes the same lines as the library call above.
    const auto decoded = run_command(tool("tandem-decode") + " --beam 1 --checkpoint " +
                                     checkpoint(name) + " " + flags + " < " + file("test.src") +
                                     " 2>/dev/null");
    ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
    EXPECT_EQ(lines_of(decoded.output), tandem.text);
    ASSERT_EQ(ct2.size(), test_src_->size());
    int ended = 0, same = 0;
    for (size_t i = 0; i < ct2.size(); ++i) {
      if (!tandem.ended[i]) continue;
      ++ended;
      same += ct2[i] == tandem.text[i];
      EXPECT_EQ(ct2[i], tandem.text[i]) << name << ", line " << i << ": " << (*test_src_)[i];
    }
    std::printf("%s: %d of %zu lines ended inside Tandem's limit, %d identical in CTranslate2\n",
                name.c_str(), ended, ct2.size(), same);
    EXPECT_GE(ended, static_cast<int>(ct2.size()) * 9 / 10) << "too few lines to compare";
  }

  static TempDir* dir_;
  static std::string* python_path_;
  static std::vector<std::string>* test_src_;
};
TempDir* Export::dir_ = nullptr;
std::string* Export::python_path_ = nullptr;
std::vector<std::string>* Export::test_src_ = nullptr;

TEST_F(Export, GreedyTranslationsAreTandemDecodesForTiedEmbeddingsAndTheMovingAverage) {
  expect_greedy_identical("tied");
  const auto provenance = nlohmann::json::parse(read_text(file("ct2-tied/tandem.json")));
  EXPECT_EQ(provenance["weights"], "averaged");
  EXPECT_EQ(provenance["step"], 400);
}

// Of the links of TRANSLATION<TAB>LINKS lines, at least 90 % join target word j to source word
// n-1-j of an n-word translation (the reversal: the model's translations have the source's words).
void expect_mostly_reversed(const std::vector<std::string>& lines) {
  size_t links = 0, reversed = 0;
  for (const auto& line : lines) {
    const size_t tab = line.find('\t');
    const size_t n = words_in(line.substr(0, tab));
    for (const auto& [s, t] : links_of(line.substr(tab + 1))) {
      reversed += s + t + 1 == n;
      ++links;
    }
  }
  std::printf("shifted guided head: %zu of %zu links the reversal's\n", reversed, links);
  EXPECT_GE(reversed * 10, links * 9);
}

// The export records the alignment heads (those --alignments reads: of the tied model, trained
// without the alignment loss, all the last layer's heads; of the untied one its guided head), so
// CTranslate2's return_attention, merged to words as tandem-decode merges it, gives tandem-decode
// --alignments' lines; also for the untied model's shifted head, which reads each piece where it
// is the decoder's input (tandem.json says so; the script reads the next step's row, the end
// token's for the last piece), and which learnt the reversal (target word j to source word n-1-j).
TEST_F(Export, AlignmentsFromReturnAttentionAreTandemDecodesAlignments) {
  for (const std::string name : {"tied", "untied"}) {
    SCOPED_TRACE(name);
    const std::string out = file("ct2-" + name + "-aligned");
    const auto exported = export_model(checkpoint(name), out);
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    const auto info = nlohmann::json::parse(read_text(out + "/tandem.json"));
    EXPECT_EQ(info.value("alignment_shift", false), name == "untied");
    const auto ct2 = ct2_translate(out, 1, "--alignments");
    const auto decoded =
        run_command(tool("tandem-decode") + " --beam 1 --alignments --checkpoint " +
                    checkpoint(name) + " < " + file("test.src") + " 2>/dev/null");
    ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
    const auto tandem = lines_of(decoded.output);
    ASSERT_EQ(ct2.size(), tandem.size());
    size_t same = 0, linked = 0;
    for (size_t i = 0; i < ct2.size(); ++i) {
      same += ct2[i] == tandem[i];
      linked += tandem[i].find('-', tandem[i].find('\t')) != std::string::npos;
    }
    std::printf("%s alignments: %zu of %zu lines identical in CTranslate2\n", name.c_str(), same,
                ct2.size());
    EXPECT_GE(same * 100, ct2.size() * 99);
    EXPECT_GE(linked * 10, ct2.size() * 9) << "lines with links";
    if (name == "untied") expect_mostly_reversed(tandem);
  }
}

TEST_F(Export, RawWeightsExportTranslatesAsDecodeWithRawWeights) {
  expect_greedy_identical("tied", "--raw-weights");
  const auto provenance = nlohmann::json::parse(read_text(file("ct2-tied-raw/tandem.json")));
  EXPECT_EQ(provenance["weights"], "raw");
}

TEST_F(Export, GreedyTranslationsAreTandemDecodesForUntiedEmbeddings) {
  expect_greedy_identical("untied");
}

TEST_F(Export, GreedyTranslationsAreTandemDecodesForPreNorm) { expect_greedy_identical("prenorm"); }

TEST_F(Export, GreedyTranslationsAreTandemDecodesForSwishAndHalvesPositions) {
  expect_greedy_identical("marian");
}

// A multilingual model (tandem-prep --corpora: one direction reverses the words, the other
// copies them, tags >>r<< and >>c<<): CTranslate2 on tagged input gives tandem-decode's greedy
// lines, and the tag decides the direction.
TEST_F(Export, AMultilingualModelTranslatesTaggedInputAsTandemDecodes) {
  prepare_two_directions(*dir_);
  train_small_model(*dir_, "multi", "multi.h5", 400, "--set model.tie_embeddings=true");
  std::vector<std::string> tagged;
  for (const char* tag : {">>r<< ", ">>c<< "}) {
    for (size_t i = 0; i < 100; ++i) tagged.push_back(tag + (*test_src_)[i]);
  }
  write_lines(file("tagged.src"), tagged);
  const std::string out = file("ct2-multi");
  const auto exported = export_model(checkpoint("multi"), out);
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const char* python = std::getenv("PYTHON");
  const auto r = run_command(
      "PYTHONPATH=" + *python_path_ + " " + (python != nullptr ? python : "python3") + " " +
      TANDEM_LAUNCH_DIR + "/ctranslate2-decode.py " + out + " " + file("tagged.src") + " " +
      file("tagged.hyp") + " --beam 1 --max-len 128 --max-input-len 128");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto ct2 = lines_of(read_text(file("tagged.hyp")));
  const auto tandem = tandem_greedy(checkpoint("multi"), checkpoint::Weights::kAverage, tagged);
  ASSERT_EQ(ct2.size(), tagged.size());
  int ended = 0, learned = 0;
  for (size_t i = 0; i < ct2.size(); ++i) {
    if (!tandem.ended[i]) continue;
    ++ended;
    EXPECT_EQ(ct2[i], tandem.text[i]) << "line " << i << ": " << tagged[i];
  }
  for (size_t i = 0; i < 100; ++i) learned += tandem.text[i] != tandem.text[100 + i];
  EXPECT_GT(ended, 180);
  EXPECT_GT(learned, 80) << "the tag should choose reversing or copying";
  // --target-lang is the tag typed: tandem-decode of the untagged lines into r.
  write_lines(file("plain.src"),
              std::vector<std::string>(test_src_->begin(), test_src_->begin() + 100));
  const auto decoded =
      run_command(tool("tandem-decode") + " --beam 1 --target-lang r --checkpoint " +
                  checkpoint("multi") + " < " + file("plain.src") + " 2>/dev/null");
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  EXPECT_EQ(lines_of(decoded.output),
            std::vector<std::string>(tandem.text.begin(), tandem.text.begin() + 100));
}

TEST_F(Export, FolderHoldsWhatACTranslate2UserNeeds) {
  const std::string out = file("ct2-contents");
  ASSERT_EQ(export_model(checkpoint("tied"), out).exit_code, 0);
  for (const char* name : {"model.bin", "config.json", "shared_vocabulary.json",
                           "sentencepiece.model", "tandem.json"}) {
    EXPECT_TRUE(fs::is_regular_file(out + "/" + name)) << name;
  }
  const auto config = nlohmann::json::parse(read_text(out + "/config.json"));
  EXPECT_EQ(config["add_source_eos"], true);
  EXPECT_EQ(config["eos_token"], "</s>");
  EXPECT_EQ(config["decoder_start_token"], "<s>");
  EXPECT_DOUBLE_EQ(config["layer_norm_epsilon"].get<double>(), 1e-5);
  const auto vocabulary = nlohmann::json::parse(read_text(out + "/shared_vocabulary.json"));
  const auto model = checkpoint::load_for_inference(checkpoint("tied"));
  ASSERT_EQ(static_cast<int64_t>(vocabulary.size()), model.vocab.size());
  EXPECT_EQ(vocabulary[0], "<pad>");
  EXPECT_EQ(vocabulary[3], "</s>");
  EXPECT_EQ(read_text(out + "/sentencepiece.model"), model.vocab.bytes());
}

TEST_F(Export, BeamFourBleuIsTandemEvalsAndInt8StaysWithinOnePoint) {
  const std::string fp32 = file("ct2-beam");
  ASSERT_EQ(export_model(checkpoint("tied"), fp32).exit_code, 0);
  write_lines(file("ct2-beam.hyp"), ct2_translate(fp32, 4));
  const double ct2_bleu = bleu_of("--hyp " + file("ct2-beam.hyp"));
  const double tandem_bleu =
      bleu_of("--checkpoint " + checkpoint("tied") + " --src " + file("test.src") + " --beam 4");
  std::printf("beam 4 BLEU: tandem-eval %.2f, CTranslate2 %.2f\n", tandem_bleu, ct2_bleu);
  EXPECT_NEAR(ct2_bleu, tandem_bleu, 0.1);
  EXPECT_GE(tandem_bleu, 50.0) << "the model should have learned something to compare";

  const std::string int8 = file("ct2-int8");
  const auto r = export_model(checkpoint("tied"), int8, "--quantization int8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // int8 matrices: the file shrinks to well under half (biases, norms, positions stay float32).
  EXPECT_LT(fs::file_size(int8 + "/model.bin"), fs::file_size(fp32 + "/model.bin") / 2);
  // Computed in int8 with the MKL kernels CTranslate2 takes on Intel CPUs. On AMD ones it takes
  // oneDNN's, whose u8·s8 products on AVX2 without VNNI cost this model 3.6 BLEU on the
  // development machine (94.81 against 98.41; MKL's: 98.41), whatever the weights.
  write_lines(file("ct2-int8.hyp"), ct2_translate(int8, 4, "", "CT2_USE_MKL=1"));
  const double int8_bleu = bleu_of("--hyp " + file("ct2-int8.hyp"));
  // The int8 weights alone, computed in float32.
  write_lines(file("ct2-int8-weights.hyp"), ct2_translate(int8, 4, "--compute-type float32"));
  const double weights_bleu = bleu_of("--hyp " + file("ct2-int8-weights.hyp"));
  std::printf("beam 4 BLEU: CTranslate2 int8 %.2f, its int8 weights in float32 %.2f\n", int8_bleu,
              weights_bleu);
  EXPECT_NEAR(int8_bleu, ct2_bleu, 1.0);
  EXPECT_NEAR(weights_bleu, ct2_bleu, 1.0);
}

TEST_F(Export, Float16ModesLoadAndTranslateAlmostAsFloat32) {
  const std::string fp32 = file("ct2-f32");
  ASSERT_EQ(export_model(checkpoint("tied"), fp32).exit_code, 0);
  const auto reference = ct2_translate(fp32, 1);
  for (const std::string q : {"float16", "int8_float16"}) {
    const std::string out = file("ct2-" + q);
    const auto r = export_model(checkpoint("tied"), out, "--quantization " + q);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // On a CPU CTranslate2 computes float16 weights in float32 (compute_type default).
    const auto got = ct2_translate(out, 1);
    ASSERT_EQ(got.size(), reference.size());
    size_t same = 0;
    for (size_t i = 0; i < got.size(); ++i) same += got[i] == reference[i];
    EXPECT_GE(same, reference.size() * 9 / 10) << q;
  }
}

TEST_F(Export, ForceReplacesAnEarlierExportAndNothingElse) {
  const std::string out = file("ct2-force");
  ASSERT_EQ(export_model(checkpoint("tied"), out).exit_code, 0);
  const auto again = export_model(checkpoint("untied"), out, "--quantization int8 --force");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const auto provenance = nlohmann::json::parse(read_text(out + "/tandem.json"));
  EXPECT_EQ(provenance["quantization"], "int8");
  EXPECT_EQ(provenance["checkpoint"], checkpoint("untied"));

  // A folder of other files is never deleted, --force or not.
  const std::string mine = file("my-folder");
  fs::create_directory(mine);
  write_file(mine + "/notes.txt", "mine");
  const auto refused = export_model(checkpoint("tied"), mine, "--force");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find(mine), std::string::npos) << refused.output;
  EXPECT_EQ(read_text(mine + "/notes.txt"), "mine");
  EXPECT_EQ(std::distance(fs::directory_iterator(mine), fs::directory_iterator()), 1);
}

// tandem-bench-decode --ctranslate2: each of its rows decoded by CTranslate2 too, on the same
// sentences and settings, which at fp32 gives the same translations.
TEST_F(Export, BenchDecodePutsCTranslate2BesideEachRow) {
  const std::string out = file("ct2-bench");
  ASSERT_EQ(export_model(checkpoint("tied"), out).exit_code, 0);
  const char* python = std::getenv("PYTHON");
  const auto r = run_command(
      "PYTHONPATH=" + *python_path_ + " " + tool("tandem-bench-decode") + " --checkpoint " +
      checkpoint("tied") + " --input " + file("test.src") + " --ref " + file("test.tgt") +
      " --beams 1 4 --threads 1 --precisions fp32 --max-lines 100 --ctranslate2 " + out +
      " --ctranslate2-python " + (python != nullptr ? python : "python3"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Tandem takes"), std::string::npos) << r.output;
  const auto rows = last_json_line(r.output)["rows"];
  ASSERT_EQ(rows.size(), 4u) << r.output;
  for (size_t i = 0; i < rows.size(); i += 2) {
    EXPECT_EQ(rows[i]["engine"], "tandem");
    EXPECT_EQ(rows[i + 1]["engine"], "ctranslate2");
    EXPECT_EQ(rows[i + 1]["beam"], rows[i]["beam"]);
    EXPECT_GT(rows[i + 1]["wall_s"].get<double>(), 0.0);
    EXPECT_EQ(rows[i + 1]["tokens"], rows[i]["tokens"]) << "beam " << rows[i]["beam"];
    EXPECT_DOUBLE_EQ(rows[i + 1]["bleu"].get<double>(), rows[i]["bleu"].get<double>());
  }
}

// CTranslate2's vmap.txt: per source piece (a line's text before its tab; "" for the line every
// batch takes) the target pieces it allows.
std::map<std::string, std::vector<std::string>> read_vmap(const std::string& path) {
  std::map<std::string, std::vector<std::string>> vmap;
  for (const auto& line : lines_of(read_text(path))) {
    const auto tab = line.find('\t');
    EXPECT_NE(tab, std::string::npos) << line;
    if (tab == std::string::npos) continue;
    std::istringstream targets(line.substr(tab + 1));
    for (std::string piece; targets >> piece;) vmap[line.substr(0, tab)].push_back(piece);
  }
  return vmap;
}

// A shortlist (tandem-shortlist) exported as vmap.txt: CTranslate2 with use_vmap and tandem-decode
// --shortlist write only pieces the list allows for the whole test set's sources (the union of
// every batch's), which leaves out much of the vocabulary; a shortlist of another vocabulary is
// exit 2 in both tools.
TEST_F(Export, AShortlistRestrictsTandemAndCTranslate2ThroughItsVocabularyMap) {
  const std::string list = file("shortlist.h5");
  const auto built = run_command(tool("tandem-shortlist") + " --corpus " + file("corpus.h5") +
                                 " --out " + list + " --top-k 2 --frequent 3");
  ASSERT_EQ(built.exit_code, 0) << built.output;
  const std::string out = file("ct2-vmap");
  ASSERT_EQ(export_model(checkpoint("tied"), out, "--shortlist " + list).exit_code, 0);
  // The pieces vmap.txt allows: its empty-source line and every line of a test source's piece.
  auto vmap = read_vmap(out + "/vmap.txt");
  ASSERT_FALSE(vmap[""].empty());
  const auto pieces = ct2_translate(out, 4, "--pieces --use-vmap");
  std::set<std::string> allowed(vmap[""].begin(), vmap[""].end());
  const auto sources = ct2_translate(out, 1, "--pieces");  // only to size the comparison
  ASSERT_EQ(pieces.size(), sources.size());
  const auto decoded = run_command(tool("tandem-decode") + " --checkpoint " + checkpoint("tied") +
                                   " --shortlist " + list + " < " + file("test.src"));
  ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
  EXPECT_EQ(lines_of(decoded.output).size(), sources.size());
  // Every source piece's list: the pieces the sentencepiece model gives the test sources.
  const auto source_pieces = run_command(
      "PYTHONPATH=" + *python_path_ + " python3 -c \"import sentencepiece as s; p = "
      "s.SentencePieceProcessor(model_file='" + out + "/sentencepiece.model'); import sys; "
      "[print(' '.join(p.encode(l.strip(), out_type=str))) for l in open('" + file("test.src") +
      "')]\"");
  ASSERT_EQ(source_pieces.exit_code, 0) << source_pieces.output;
  for (const auto& line : lines_of(source_pieces.output)) {
    std::istringstream in(line);
    for (std::string piece; in >> piece;) allowed.insert(vmap[piece].begin(), vmap[piece].end());
  }
  const auto vocabulary = nlohmann::json::parse(read_text(out + "/shared_vocabulary.json"));
  EXPECT_LT(allowed.size() + 4, vocabulary.size()) << "the list leaves nothing out";
  for (const auto& line : pieces) {
    std::istringstream in(line);
    for (std::string piece; in >> piece;) {
      EXPECT_TRUE(allowed.count(piece)) << piece << " in " << line;
    }
  }
  // Another vocabulary's shortlist (the corpus's vocabulary is the model's: a prep with another
  // vocabulary size makes another).
  const auto other_prep = run_command(
      tool("tandem-prep") + " --train-src " + file("train.src") + " --train-tgt " +
      file("train.tgt") + " --vocab-size 48 --out " + file("other.h5"));
  ASSERT_EQ(other_prep.exit_code, 0) << other_prep.output;
  ASSERT_EQ(run_command(tool("tandem-shortlist") + " --corpus " + file("other.h5") + " --out " +
                        file("other-list.h5")).exit_code, 0);
  const auto refused = run_command(tool("tandem-decode") + " --checkpoint " + checkpoint("tied") +
                                   " --shortlist " + file("other-list.h5") + " < " +
                                   file("test.src"));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_EQ(lines_of(refused.output).size(), 1u) << refused.output;
  EXPECT_NE(refused.output.find("another vocabulary"), std::string::npos) << refused.output;
  const auto refused_export = export_model(checkpoint("tied"), file("ct2-other"),
                                           "--shortlist " + file("other-list.h5"));
  EXPECT_EQ(refused_export.exit_code, 2) << refused_export.output;
  EXPECT_FALSE(fs::exists(file("ct2-other"))) << refused_export.output;
}

// The entries of `dir` whose names start with `prefix` (a staging folder left behind).
int entries_starting(const std::string& dir, const std::string& prefix) {
  int count = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    count += entry.path().filename().string().rfind(prefix, 0) == 0;
  }
  return count;
}

TEST_F(Export, BadInputExitsTwoOnOneLineNamingTheFileAndLeavesNoFolder) {
  write_file(file("not-hdf5.h5"), "plain text\n");
  const std::string whole = read_text(checkpoint("tied"));
  write_file(file("truncated.h5"), whole.substr(0, whole.size() / 2));
  const std::string existing = file("ct2-existing");
  ASSERT_EQ(export_model(checkpoint("tied"), existing).exit_code, 0);
  const std::string existing_model = read_text(existing + "/model.bin");
  write_file(file("a-file"), "not a folder");
  struct Case {
    std::string checkpoint, out, flags, must_mention;
  };
  const std::vector<Case> cases = {
      {file("not-hdf5.h5"), file("out-a"), "", "not-hdf5.h5"},
      {file("corpus.h5"), file("out-b"), "", "corpus.h5"},  // HDF5, but not a checkpoint
      {file("truncated.h5"), file("out-c"), "", "truncated.h5"},
      {file("absent.h5"), file("out-d"), "", "absent.h5"},
      {checkpoint("tied"), existing, "", existing},
      {checkpoint("tied"), file("a-file"), "--force", file("a-file")},
      {checkpoint("tied"), file("a-file") + "/out", "", file("a-file") + "/out"},
      {checkpoint("tied"), file("no/such/dir/out"), "", file("no/such/dir/out")},
      {checkpoint("tied"), file("out-e"), "--quantization int4", "int4"},
  };
  for (const auto& c : cases) {
    const auto r = export_model(c.checkpoint, c.out, c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.out << "\n" << r.output;
    EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
    EXPECT_NE(r.output.find(c.must_mention), std::string::npos) << r.output;
    if (c.out != existing && c.out != file("a-file")) {
      EXPECT_FALSE(fs::exists(c.out)) << c.out;
    }
  }
  EXPECT_EQ(read_text(existing + "/model.bin"), existing_model);
  EXPECT_EQ(entries_starting(dir_->path(), ".out-"), 0) << "a staging folder was left behind";
  const auto unknown = run_command(tool("tandem-export") + " --checkpoint " + checkpoint("tied") +
                                   " --to onnx --out " + file("out-f"));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("onnx"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace tandem::test
