// The text side of tandem-prep: a split's two sides read in step, line for line, and the checks
// a pair passes before any vocabulary is involved (neither side blank, both strict UTF-8).
#pragma once

#include <cstdint>
#include <string>

#include "data/prep/corpus_files.h"
#include "data/prep/text_input.h"

namespace tandem::data {

struct RawPair {
  std::string src, tgt;
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

// The two sides of a split read in step, checked to have the same number of lines.
class PairReader {
 public:
  // `label` names the split in messages ("train", "corpus 'en-es' train").
  PairReader(const SplitFiles& files, const std::string& label)
      : label_(label),
        files_(files),
        src_(files.src, label + " source"),
        tgt_(files.tgt, label + " target") {}

  // The next pair; false after the last. Throws std::invalid_argument, with both line counts,
  // when one side has lines left over.
  bool next(std::string& src, std::string& tgt) {
    const bool has_src = src_.next(src);
    const bool has_tgt = tgt_.next(tgt);
    if (has_src && has_tgt) return true;
    if (has_src || has_tgt) throw_mismatch();
    return false;
  }
  int64_t pairs() const { return src_.lines(); }
  // "line 7 of 'a.de' / 'a.en'", or both positions when the sides' files are cut differently.
  std::string position_of(int64_t index) const;
  uint32_t src_checksum() const { return src_.checksum(); }
  uint32_t tgt_checksum() const { return tgt_.checksum(); }

 private:
  [[noreturn]] void throw_mismatch();  // reads both sides to the end for the counts

  std::string label_;
  SplitFiles files_;
  TextReader src_, tgt_;
};

}  // namespace tandem::data
