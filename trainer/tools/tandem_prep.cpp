// tandem-prep: raw parallel text → one HDF5 corpus file (vocabulary + token arrays + provenance).
#include <CLI/CLI.hpp>
#include <iostream>

#include "data/prep.h"
#include "trainer/common/error.h"

namespace {

constexpr const char* kExamples = R"(
Examples:
  tandem-prep --train-src train.de --train-tgt train.en \
              --valid-src valid.de --valid-tgt valid.en --vocab-size 8000 --out corpus.h5
  h5dump -H corpus.h5    # the layout and what the corpus was built from)";

// Adds --<name>-src and --<name>-tgt; the pair is optional unless `required`, but never half-given.
void add_split(CLI::App& app, tandem::data::SplitFiles& split, bool required) {
  auto* src = app.add_option("--" + split.name + "-src", split.src,
                             split.name + " source sentences, one per line");
  auto* tgt = app.add_option("--" + split.name + "-tgt", split.tgt,
                             split.name + " target sentences, line i translating source line i");
  if (required) {
    src->required();
    tgt->required();
  } else {
    src->needs(tgt);
    tgt->needs(src);
  }
}

void add_options(CLI::App& app, std::vector<tandem::data::SplitFiles>& splits,
                 tandem::data::PrepOptions& options) {
  for (auto& split : splits) add_split(app, split, split.name == "train");
  app.add_option("--vocab-size", options.vocab.vocab_size,
                 "SentencePiece pieces, specials included")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{5}, int64_t{1} << 30));
  app.add_option("--model-type", options.vocab.model_type, "SentencePiece model: unigram or bpe")
      ->capture_default_str()
      ->check(CLI::IsMember({"unigram", "bpe"}));
  app.add_option("--character-coverage", options.vocab.character_coverage,
                 "share of characters the vocabulary covers (lower for CJK)")
      ->capture_default_str()
      ->check(CLI::Range(0.9, 1.0));
  app.add_option("--max-len", options.max_len, "skip pairs with more tokens than this on a side")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--out", options.out, "corpus file to write (via <out>.tmp, then a rename)")
      ->required();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app(
      "Binarize parallel text into a Tandem corpus (HDF5) with a joint SentencePiece "
      "vocabulary",
      "tandem-prep");
  app.footer(kExamples);
  std::vector<tandem::data::SplitFiles> splits = {
      {"train", "", ""}, {"valid", "", ""}, {"test", "", ""}};
  tandem::data::PrepOptions options;
  add_options(app, splits, options);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "tandem-prep: error: " << e.what() << " (see --help)\n";
    return tandem::kExitUsage;
  }
  try {
    for (const auto& split : splits) {
      if (!split.src.empty()) options.splits.push_back(split);
    }
    std::cout << tandem::data::prepare_corpus(options).to_string() << "wrote " << options.out
              << "\n";
    return tandem::kExitOk;
  } catch (const std::exception& e) {
    std::cerr << "tandem-prep: error: " << e.what() << "\n";
    return tandem::exit_code_for(e);
  }
}
