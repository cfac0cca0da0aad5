// The text side of tandem-prep: a split's two sides (and its word alignments, if given) read in
// step, line for line, and the checks a pair passes before any vocabulary is involved (neither
// side blank, both strict UTF-8).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/prep/corpus_files.h"
#include "data/prep/text_input.h"

namespace tandem::data {

struct RawPair {
  std::string src, tgt;
  std::string align;     // its alignment line, when the split has alignments
  bool aligned = false;  // whether it has
};

// Why a pair is skipped (an index into kSkipReasons), or kKept.
enum Verdict : int8_t { kKept = -1, kEmpty = 0, kInvalidUtf8 = 1, kTooLong = 2 };
inline constexpr const char* kSkipReasons[] = {"empty", "invalid_utf8", "too_long"};

// Strict UTF-8: no overlong forms, surrogates or code points past U+10FFFF.
bool is_valid_utf8(const std::string& text);

// The checks that need no vocabulary: kEmpty, kInvalidUtf8 or kKept.
Verdict raw_verdict(const std::string& src, const std::string& tgt);

// "train" for the one corpus of a file without corpora, else "corpus 'en-es' train".
std::string label_of(const CorpusFiles& corpus, const std::string& split);

// The corpus's split of that name, or nullptr.
const SplitFiles* find_split(const CorpusFiles& corpus, const std::string& name);

// The two sides of a split, and its alignments if it has them, read in step, checked to have the
// same number of lines.
class PairReader {
 public:
  // `label` names the split in messages ("train", "corpus 'en-es' train").
  PairReader(const SplitFiles& files, const std::string& label);

  // The next pair; false after the last. Throws std::invalid_argument, with the line counts,
  // when one side or the alignments have lines left over.
  bool next(RawPair& pair) {
    const bool has_src = src_.next(pair.src);
    const bool has_tgt = tgt_.next(pair.tgt);
    pair.aligned = align_ != nullptr;
    const bool has_align = pair.aligned ? align_->next(pair.align) : has_src;
    if (has_src && has_tgt && has_align) return true;
    if (has_src || has_tgt || has_align) throw_mismatch();
    return false;
  }
  int64_t pairs() const { return src_.lines(); }
  // "line 7 of 'a.de' / 'a.en'", or both positions when the sides' files are cut differently.
  std::string position_of(int64_t index) const;
  // "line 7 of 'a.align'": where pair `index`'s alignment line is (the split has alignments).
  std::string align_position_of(int64_t index) const { return align_->position_of(index); }
  bool aligned() const { return align_ != nullptr; }
  uint32_t src_checksum() const { return src_.checksum(); }
  uint32_t tgt_checksum() const { return tgt_.checksum(); }
  uint32_t align_checksum() const { return align_ ? align_->checksum() : 0; }

 private:
  [[noreturn]] void throw_mismatch();  // reads every input to the end for the counts

  std::string label_;
  SplitFiles files_;
  TextReader src_, tgt_;
  std::unique_ptr<TextReader> align_;  // null without alignments
};

}  // namespace tandem::data
