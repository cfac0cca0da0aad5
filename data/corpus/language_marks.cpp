#include "data/corpus/language_marks.h"

#include <set>
#include <stdexcept>

namespace tandem::data {

std::vector<int32_t> LanguageMarks::source(const Vocab& vocab, const std::string& line) const {
  if (source_code >= 0) {
    std::vector<int32_t> ids = {source_code};
    const auto pieces = vocab.encode(line, Side::kSource);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    return ids;
  }
  const bool own_tag = tag.empty() || line.compare(0, 2, ">>") == 0;
  return vocab.encode(own_tag ? line : tag + " " + line, Side::kSource);
}

std::vector<int32_t> LanguageMarks::source(const Vocab& vocab, const std::string& line,
                                           std::vector<int32_t>* words) const {
  if (source_code >= 0) {
    std::vector<int32_t> ids = {source_code};
    const auto pieces = vocab.encode(line, Side::kSource, words);
    ids.insert(ids.end(), pieces.begin(), pieces.end());
    words->insert(words->begin(), -1);
    return ids;
  }
  const bool own_tag = tag.empty() || line.compare(0, 2, ">>") == 0;
  if (own_tag) {
    auto ids = vocab.encode(line, Side::kSource, words);
    for (size_t k = 0; k < ids.size(); ++k) {
      if (vocab.tag_id(vocab.piece(ids[k])) >= 0) (*words)[k] = -1;
    }
    return ids;
  }
  // The tag as a word of its own before the line's: word k of the text is word k - 1 of the line.
  auto ids = vocab.encode(tag + " " + line, Side::kSource, words);
  for (int32_t& word : *words) --word;
  return ids;
}

std::vector<int32_t> LanguageMarks::target(const Vocab& vocab, const std::string& line) const {
  std::vector<int32_t> ids;
  if (target_code >= 0) ids.push_back(target_code);
  const auto pieces = vocab.encode(line, Side::kTarget);
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  return ids;
}

std::vector<int32_t> LanguageMarks::target(const Vocab& vocab, const std::string& line,
                                           std::vector<int32_t>* words) const {
  std::vector<int32_t> ids;
  if (target_code >= 0) ids.push_back(target_code);
  const auto pieces = vocab.encode(line, Side::kTarget, words);
  ids.insert(ids.end(), pieces.begin(), pieces.end());
  if (target_code >= 0) words->insert(words->begin(), -1);
  return ids;
}

std::vector<int32_t> LanguageMarks::first_tokens(size_t sentences) const {
  return target_code >= 0 ? std::vector<int32_t>(sentences, target_code) : std::vector<int32_t>{};
}

LanguageMarks direction_marks(const Vocab& vocab, const std::string& src_lang,
                              const std::string& tgt_lang, bool tagged) {
  LanguageMarks marks;
  if (vocab.coded()) {
    marks.source_code = vocab.code_id(src_lang);
    marks.target_code = vocab.code_id(tgt_lang);
  } else if (tagged) {
    marks.tag = language_tag(tgt_lang);
    marks.tag_id = vocab.tag_id(marks.tag);
  }
  return marks;
}

std::vector<int32_t> target_codes(const Vocab& vocab, const std::vector<SentencePair>& pairs) {
  std::vector<int32_t> codes;
  if (!vocab.coded()) return codes;
  std::set<int32_t> known;
  for (const auto& code : vocab.language_codes()) known.insert(code.id);
  for (const auto& pair : pairs) {
    if (pair.tgt.empty() || !known.count(pair.tgt.front())) {
      throw std::invalid_argument(
          "a sentence pair whose target does not start with a language code of the model "
          "(prepare the corpus with tandem-prep --vocab-from the model)");
    }
    codes.push_back(pair.tgt.front());
  }
  return codes;
}

}  // namespace tandem::data
