// check_prep_options: tandem-prep's options, checked before any file is read.
#include "data/prep/prep_checks.h"

#include <cctype>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

namespace tandem::data {
namespace {

// Whether `text` is made of letters, digits and the characters of `extra` only (and not empty).
bool is_word(const std::string& text, const std::string& extra) {
  if (text.empty()) return false;
  for (const char c : text) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && extra.find(c) == std::string::npos) {
      return false;
    }
  }
  return true;
}

// One corpus's splits; `prefix` starts each message ("" or "corpus 'en-es': ").
void validate_splits(const std::vector<SplitFiles>& splits, const std::string& prefix) {
  std::set<std::string> names;
  for (const SplitFiles& split : splits) {
    const std::string what = prefix + "split '" + split.name + "'";
    if (split.name != "train" && split.name != "valid" && split.name != "test") {
      throw std::invalid_argument(what + ": expected train, valid or test");
    }
    if (!names.insert(split.name).second) throw std::invalid_argument(what + " is given twice");
    if (split.src.empty() || split.tgt.empty()) {
      throw std::invalid_argument(what + " needs both a source and a target file");
    }
    for (const auto* side : {&split.src, &split.tgt}) {
      for (const std::string& path : *side) {
        if (path.empty()) throw std::invalid_argument(what + ": empty file name");
      }
    }
  }
  if (names.count("train") == 0)
    throw std::invalid_argument(prefix + "the train split is required");
}

}  // namespace

void check_prep_options(const PrepOptions& options) {
  if (options.splits.empty() == options.corpora.empty()) {
    throw std::invalid_argument(options.corpora.empty()
                                    ? "the train split is required"
                                    : "give either one corpus's splits or several corpora");
  }
  if (!options.splits.empty()) validate_splits(options.splits, "");
  std::set<std::string> names;
  for (const CorpusFiles& corpus : options.corpora) {
    if (!is_word(corpus.name, "._-")) {
      throw std::invalid_argument("corpus name '" + corpus.name +
                                  "': expected letters, digits, '.', '_' or '-'");
    }
    if (!names.insert(corpus.name).second) {
      throw std::invalid_argument("corpus '" + corpus.name + "' is given twice");
    }
    for (const auto& [key, language] :
         {std::pair{"src_lang", corpus.src_lang}, std::pair{"tgt_lang", corpus.tgt_lang}}) {
      if (!is_word(language, "_-")) {
        throw std::invalid_argument("corpus '" + corpus.name + "': " + key + " '" + language +
                                    "': expected a language code (letters, digits, '_', '-')");
      }
    }
    validate_splits(corpus.splits, "corpus '" + corpus.name + "': ");
  }
  if (options.out.empty()) throw std::invalid_argument("the output corpus path is empty");
  if (options.max_len < 1) {
    throw std::invalid_argument("max_len " + std::to_string(options.max_len) + ": expected >= 1");
  }
  if (options.chunk_pairs < 1) {
    throw std::invalid_argument("chunk_pairs " + std::to_string(options.chunk_pairs) +
                                ": expected >= 1");
  }
  if (options.threads < 0) {
    throw std::invalid_argument("threads " + std::to_string(options.threads) +
                                ": expected >= 1, or 0 for one per core");
  }
  if (options.vocab.input_sentence_size < 0) {
    throw std::invalid_argument("vocabulary sample " +
                                std::to_string(options.vocab.input_sentence_size) +
                                ": expected >= 1 sentences, or 0 for all");
  }
}

}  // namespace tandem::data
