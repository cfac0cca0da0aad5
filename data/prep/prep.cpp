// prepare_corpus: check that every input opens, sample the train split and train the vocabulary on
// the sample (data/prep/vocab_sample.h), then stream every split through the encoder into the HDF5
// corpus (data/prep/corpus_writer.h), written as "<out>.tmp" and renamed.
#include "data/prep/prep.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "data/corpus/direction.h"
#include "data/prep/corpus_writer.h"
#include "data/prep/pair_reader.h"
#include "data/prep/prep_checks.h"
#include "data/prep/vocab_sample.h"
#include "trainer/common/error.h"

namespace tandem::data {
namespace {

// The corpora to write: options.corpora, or the one corpus of options.splits (no name).
std::vector<CorpusFiles> corpora_of(const PrepOptions& options) {
  if (!options.corpora.empty()) return options.corpora;
  return {CorpusFiles{"", options.src_lang, options.tgt_lang, options.splits}};
}

// A vocabulary with language codes needs each corpus's languages among them; any other takes none
// for one corpus.
void check_languages(const PrepOptions& options, const Vocab& vocab,
                     const std::vector<CorpusFiles>& corpora) {
  if (!vocab.coded()) {
    if (!options.src_lang.empty() || !options.tgt_lang.empty()) {
      throw std::invalid_argument(
          "--src-lang/--tgt-lang name a corpus's languages for a vocabulary with language codes "
          "(--vocab-from an imported NLLB-200 or M2M-100); this one has none");
    }
    return;
  }
  for (const CorpusFiles& corpus : corpora) {
    const std::string where = corpus.name.empty() ? "the corpus" : "corpus '" + corpus.name + "'";
    for (const auto& [side, language] :
         {std::pair{"source", corpus.src_lang}, std::pair{"target", corpus.tgt_lang}}) {
      if (vocab.code_id(language) >= 0) continue;
      throw std::invalid_argument(
          where + ": " +
          (language.empty() ? std::string("no ") + side + " language"
                            : std::string(side) + " language '" + language + "' is not a code") +
          " of the vocabulary of '" + options.vocab_from + "', which marks languages with codes " +
          (corpus.name.empty() ? "(give --src-lang and --tgt-lang" : "(name them in the manifest") +
          "; the nearest: " + vocab.nearest_languages(language, 5) + ")");
    }
  }
}

// ">>es<<" for each target language, in order of appearance, when there are several; none
// otherwise (one target language needs no tag).
std::vector<std::string> language_tags(const std::vector<CorpusFiles>& corpora) {
  std::vector<std::string> tags;
  for (const CorpusFiles& corpus : corpora) {
    const std::string tag = language_tag(corpus.tgt_lang);
    if (std::find(tags.begin(), tags.end(), tag) == tags.end()) tags.push_back(tag);
  }
  if (tags.size() < 2) tags.clear();
  return tags;
}

// Fails before the slow work when `out` cannot be written through `tmp` (missing directory,
// permissions).
void check_writable(const std::string& tmp, const std::string& out) {
  std::FILE* probe = std::fopen(tmp.c_str(), "wb");
  if (probe == nullptr) throw_cannot_open("output", out);
  std::fclose(probe);
  std::remove(tmp.c_str());
}

// The vocabulary and the tags its sources start with (`tags`): trained on a sample of the train
// split (balanced across languages for several corpora) with the tags as pieces of their own, or
// the one given, which must have the tags; one with language codes marks both sides with those
// instead, never with tags.
Vocab make_vocab(const PrepOptions& options, const std::vector<CorpusFiles>& corpora,
                 std::vector<std::string>* tags) {
  if (!options.vocab_bytes.empty()) {
    Vocab vocab = Vocab::from_bytes(options.vocab_bytes);
    *tags = vocab.coded() ? std::vector<std::string>{} : language_tags(corpora);
    for (const std::string& tag : *tags) {
      if (vocab.tag_id(tag) < 0) {
        throw std::invalid_argument("the vocabulary of '" + options.vocab_from +
                                    "' has no piece '" + tag +
                                    "' for the corpora's target language");
      }
    }
    return vocab;
  }
  *tags = language_tags(corpora);
  VocabTrainOptions train = options.vocab;
  train.user_symbols = *tags;
  if (options.corpora.empty()) {
    return Vocab::train(sample_sentences(*find_split(corpora.front(), "train"), train), train);
  }
  return Vocab::train(sample_by_language(corpora, train), train);
}

}  // namespace

PrepSummary prepare_corpus(const PrepOptions& options) {
  check_prep_options(options);
  const std::string tmp = options.out + ".tmp";
  check_writable(tmp, options.out);
  const std::vector<CorpusFiles> corpora = corpora_of(options);
  for (const CorpusFiles& corpus : corpora) {
    for (const SplitFiles& files : corpus.splits) {
      PairReader check_readable(files, label_of(corpus, files.name));
    }
  }
  std::vector<std::string> tags;
  const Vocab vocab = make_vocab(options, corpora, &tags);
  check_languages(options, vocab, corpora);

  PrepSummary summary;
  summary.vocab_size = vocab.size();
  for (const std::string& tag : tags) summary.tags.emplace_back(tag, vocab.tag_id(tag));
  try {
    write_corpus(tmp, vocab, options, corpora, tags, summary);
    if (std::rename(tmp.c_str(), options.out.c_str()) != 0) {
      throw std::runtime_error("cannot rename '" + tmp + "' to '" + options.out + "'");
    }
  } catch (...) {
    std::remove(tmp.c_str());
    throw;
  }
  return summary;
}

}  // namespace tandem::data
