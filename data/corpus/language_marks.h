// How a sentence carries its languages for a model's vocabulary, decided here alone: tandem-prep
// writes corpora with these marks, tandem-decode, tandem-score and tandem-eval put them on the
// lines they read, and evaluation reads them back from a prepared corpus's pairs.
//   - A vocabulary with language codes (an imported NLLB-200 or M2M-100: "eng_Latn", "en"): the
//     source starts with its language's code, the target, and so every translation, with the
//     target's.
//   - One with >>xx<< tags (OPUS-MT, tandem-prep --corpora): the source starts with the target
//     language's tag (a line that starts with its own keeps it); the target has none.
//   - Any other translates one direction: no marks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/corpus/direction.h"
#include "data/vocab/vocab.h"

namespace tandem::data {

struct LanguageMarks {
  int32_t source_code = -1;  // a code vocabulary's source prefix; -1: none
  int32_t target_code = -1;  // a code vocabulary's first target token; -1: none
  std::string tag;           // a tagged vocabulary's ">>es<<"; "": none
  int32_t tag_id = -1;       // its id

  // The token a prepared source sentence starts with (a code, or the tag); -1: none.
  int32_t source_prefix() const { return source_code >= 0 ? source_code : tag_id; }
  // A line's source ids as the model reads them (without EOS). The tag goes in as text before the
  // line, as a user would type it.
  std::vector<int32_t> source(const Vocab& vocab, const std::string& line) const;
  // The same ids, and for each the word of `line` it comes from (an index into
  // split_words(line); -1 for the code or tag the marks add, and for a tag the line starts with).
  std::vector<int32_t> source(const Vocab& vocab, const std::string& line,
                              std::vector<int32_t>* words) const;
  // A reference line's ids as the model predicts them (without EOS).
  std::vector<int32_t> target(const Vocab& vocab, const std::string& line) const;
  // The same ids, and for each the word of `line` it comes from (-1 for a code).
  std::vector<int32_t> target(const Vocab& vocab, const std::string& line,
                              std::vector<int32_t>* words) const;
  // Per sentence, the token its translation starts with (none without codes).
  std::vector<int32_t> first_tokens(size_t sentences) const;
};

// The marks of the direction `src_lang` → `tgt_lang` in `vocab`: its codes in a vocabulary with
// codes; else, when the corpus is `tagged`, the target's tag; else none. A language the vocabulary
// lacks gives -1 (the callers check the languages first).
LanguageMarks direction_marks(const Vocab& vocab, const std::string& src_lang,
                              const std::string& tgt_lang, bool tagged);

// Per pair of a prepared corpus, the language code its target starts with, in a vocabulary with
// codes (what translations of its source must start with); none for any other vocabulary.
// std::invalid_argument when such a vocabulary's pair has no code there.
std::vector<int32_t> target_codes(const Vocab& vocab, const std::vector<SentencePair>& pairs);

}  // namespace tandem::data
