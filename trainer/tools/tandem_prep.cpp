// tandem-prep: raw parallel text → one HDF5 corpus file (vocabulary + token arrays + provenance).
#include <CLI/CLI.hpp>
#include <iostream>
#include <utility>

#include "data/corpus/corpus.h"
#include "data/prep/manifest.h"
#include "data/prep/prep.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/error.h"

namespace {

constexpr const char* kExamples = R"(
Examples:
  tandem-prep --train-src train.de --train-tgt train.en \
              --valid-src valid.de --valid-tgt valid.en --vocab-size 8000 --out corpus.h5
  tandem-prep --train-src europarl.de.gz news.de.gz --train-tgt europarl.en.gz news.en.gz \
              --valid-src valid.de --valid-tgt valid.en --vocab-size 32000 --out corpus.h5
  tandem-prep --train-src domain.de --train-tgt domain.en --vocab-from opus-mt-de-en.h5 \
              --out domain.h5    # to fine-tune a model: its vocabulary, none trained
  tandem-prep --corpora corpora.yaml --vocab-size 16000 --out multi.h5
                         # several directions in one model: a >>xx<< tag per target language
  tandem-prep --train-src my.en --train-tgt my.es --vocab-from nllb.h5 \
              --src-lang eng_Latn --tgt-lang spa_Latn --out my.h5
                         # an imported NLLB-200 / M2M-100: its language codes start each side
  tandem-prep --corpora both-ways.yaml --vocab-from nllb.h5 --out both.h5
                         # the manifest's languages are the model's codes (eng_Latn, spa_Latn)
  tandem-prep --train-src train.en --train-tgt train.es --train-align train.align \
              --out aligned.h5   # word alignments for train.alignment (launch/align.sh)
  h5dump -H corpus.h5    # the layout and what the corpus was built from

Memory is bounded by --vocab-sample, not by the corpus: the text is read twice (a sample for the
vocabulary, then encoding), and the token arrays pass through temporary files beside --out.)";

// Adds --<name>-src and --<name>-tgt, never half-given; returns them.
std::vector<CLI::Option*> add_split(CLI::App& app, tandem::data::SplitFiles& split) {
  auto* src = app.add_option("--" + split.name + "-src", split.src,
                             split.name +
                                 " source sentences, one per line (several files are "
                                 "read in order; plain or gzip)");
  auto* tgt = app.add_option("--" + split.name + "-tgt", split.tgt,
                             split.name + " target sentences, line i translating source line i");
  auto* align = app.add_option("--" + split.name + "-align", split.align,
                               split.name +
                                   " word alignments, line i for pair i (Pharaoh i-j over the "
                                   "words between white space, as eflomal writes them; "
                                   "launch/align.sh)");
  src->needs(tgt);
  tgt->needs(src);
  align->needs(src);
  return {src, tgt, align};
}

void add_options(CLI::App& app, std::vector<tandem::data::SplitFiles>& splits,
                 std::string& manifest, tandem::data::PrepOptions& options) {
  auto* corpora =
      app.add_option("--corpora", manifest,
                     "several corpora into one file, each a direction with its own "
                     "files: a YAML manifest (docs/corpus.md), instead of --train-src...");
  for (auto& split : splits) {
    for (auto* side : add_split(app, split)) corpora->excludes(side);
  }
  auto* from = app.add_option("--vocab-from", options.vocab_from,
                              "use the vocabulary of this checkpoint or corpus (.h5) instead of "
                              "training one: to fine-tune its model on this text");
  for (auto [flag, language] :
       {std::pair{"--src-lang", &options.src_lang}, std::pair{"--tgt-lang", &options.tgt_lang}}) {
    app.add_option(flag, *language,
                   "the corpus's languages in the model's codes, with --vocab-from a model that "
                   "marks languages with codes (an imported NLLB-200: eng_Latn, M2M-100: en)")
        ->needs(from)
        ->excludes(corpora);
  }
  auto* size = app.add_option("--vocab-size", options.vocab.vocab_size,
                              "SentencePiece pieces, specials included")
                   ->capture_default_str()
                   ->check(CLI::Range(int64_t{5}, int64_t{1} << 30));
  auto* type = app.add_option("--model-type", options.vocab.model_type,
                              "SentencePiece model: unigram or bpe")
                   ->capture_default_str()
                   ->check(CLI::IsMember({"unigram", "bpe"}));
  auto* coverage = app.add_option("--character-coverage", options.vocab.character_coverage,
                                  "share of characters the vocabulary covers (lower for CJK)")
                       ->capture_default_str()
                       ->check(CLI::Range(0.9, 1.0));
  app.add_option("--max-len", options.max_len, "skip pairs with more tokens than this on a side")
      ->capture_default_str()
      ->check(tandem::cli::kPositive);
  auto* sample = app.add_option("--vocab-sample", options.vocab.input_sentence_size,
                                "sentences (both sides) sampled from train for the vocabulary, "
                                "0 = all; training it takes ~25 bytes per sampled character")
                     ->capture_default_str()
                     ->check(tandem::cli::kNonNegative);
  auto* seed =
      app.add_option("--seed", options.vocab.seed, "seed of that sample")->capture_default_str();
  for (auto* training : {size, type, coverage, sample, seed}) from->excludes(training);
  app.add_option("--threads", options.threads,
                 "encoding threads, 0 = one per CPU (the output is the same for any count)")
      ->capture_default_str()
      ->check(tandem::cli::kNonNegative);
  app.add_option("--out", options.out, "corpus file to write (via <out>.tmp, then a rename)")
      ->required();
}

// The /vocab of a Tandem checkpoint or corpus; std::invalid_argument naming the file otherwise.
std::string vocabulary_of(const std::string& path) {
  std::string not_checkpoint;
  try {
    return tandem::checkpoint::load_description(path).vocab;
  } catch (const std::invalid_argument& e) {
    not_checkpoint = e.what();
  }
  try {
    return tandem::data::Corpus(path).vocab().bytes();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--vocab-from '" + path + "': neither a checkpoint nor a corpus (" +
                                not_checkpoint + "; " + e.what() + ")");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Binarize parallel text into a Tandem corpus (HDF5) with a joint SentencePiece "
      "vocabulary, or an existing model's",
      "tandem-prep");
  app.footer(kExamples);
  std::vector<tandem::data::SplitFiles> splits = {
      {"train", {}, {}}, {"valid", {}, {}}, {"test", {}, {}}};
  tandem::data::PrepOptions options;
  std::string manifest;
  add_options(app, splits, manifest, options);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-prep", argc, argv))
    return *done;
  try {
    for (const auto& split : splits) {
      if (!split.src.empty()) options.splits.push_back(split);
    }
    if (!manifest.empty()) {
      options.corpora = tandem::data::read_corpora_manifest(manifest);
    } else if (splits.front().src.empty()) {
      throw std::invalid_argument("--train-src and --train-tgt are required (or --corpora FILE)");
    }
    if (!options.vocab_from.empty()) options.vocab_bytes = vocabulary_of(options.vocab_from);
    const tandem::data::PrepSummary summary = tandem::data::prepare_corpus(options);
    for (const auto& split : summary.splits) {
      for (const std::string& skipped : split.first_skipped) {
        std::cerr << "tandem-prep: warning: " << split.name << ": skipped " << skipped << "\n";
      }
      int64_t dropped = 0;
      for (const auto& [reason, count] : split.dropped) dropped += count;
      const auto shown = static_cast<int64_t>(split.first_skipped.size());
      if (dropped > shown) {
        std::cerr << "tandem-prep: warning: " << split.name << ": and " << dropped - shown
                  << " more skipped pairs (counts below)\n";
      }
    }
    std::cout << summary.to_string() << "wrote " << options.out << "\n";
    return tandem::kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "tandem-prep: error: " << e.what() << "\n";
    return tandem::exit_code_for(e);
  }
}
