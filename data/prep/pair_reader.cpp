#include "data/prep/pair_reader.h"

#include <memory>
#include <stdexcept>

namespace tandem::data {
namespace {

bool is_blank(const std::string& text) {
  return text.find_first_not_of(" \t\r\v\f") == std::string::npos;
}

// Continuation bytes after a UTF-8 lead byte, or -1 when it cannot start a character.
int utf8_extra_bytes(uint8_t lead) {
  if (lead < 0x80) return 0;
  if ((lead & 0xE0) == 0xC0) return 1;
  if ((lead & 0xF0) == 0xE0) return 2;
  if ((lead & 0xF8) == 0xF0) return 3;
  return -1;
}

}  // namespace

bool is_valid_utf8(const std::string& text) {
  static const uint32_t kMinCodePoint[] = {0, 0x80, 0x800, 0x10000};
  static const uint8_t kLeadMask[] = {0x7F, 0x1F, 0x0F, 0x07};
  size_t i = 0;
  while (i < text.size()) {
    const auto lead = static_cast<uint8_t>(text[i]);
    const int extra = utf8_extra_bytes(lead);
    if (extra < 0 || i + extra >= text.size()) return false;
    uint32_t code = lead & kLeadMask[extra];
    for (int k = 1; k <= extra; ++k) {
      const auto next = static_cast<uint8_t>(text[i + k]);
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3Fu);
    }
    if (code < kMinCodePoint[extra] || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += extra + 1;
  }
  return true;
}

Verdict raw_verdict(const std::string& src, const std::string& tgt) {
  if (is_blank(src) || is_blank(tgt)) return kEmpty;
  if (!is_valid_utf8(src) || !is_valid_utf8(tgt)) return kInvalidUtf8;
  return kKept;
}

std::string label_of(const CorpusFiles& corpus, const std::string& split) {
  return corpus.name.empty() ? split : "corpus '" + corpus.name + "' " + split;
}

const SplitFiles* find_split(const CorpusFiles& corpus, const std::string& name) {
  for (const SplitFiles& files : corpus.splits) {
    if (files.name == name) return &files;
  }
  return nullptr;
}

PairReader::PairReader(const SplitFiles& files, const std::string& label)
    : label_(label),
      files_(files),
      src_(files.src, label + " source"),
      tgt_(files.tgt, label + " target") {
  if (!files.align.empty()) {
    align_ = std::make_unique<TextReader>(files.align, label + " alignments");
  }
}

std::string PairReader::position_of(int64_t index) const {
  const std::string src = src_.position_of(index);
  const std::string tgt = tgt_.position_of(index);
  const size_t src_of = src.find(" of ");
  const size_t tgt_of = tgt.find(" of ");
  if (src.compare(0, src_of, tgt, 0, tgt_of) == 0) return src + " / " + tgt.substr(tgt_of + 4);
  return src + " / " + tgt;
}

void PairReader::throw_mismatch() {
  std::string line;
  while (src_.next(line)) {
  }
  while (tgt_.next(line)) {
  }
  if (align_) {
    while (align_->next(line)) {
    }
    if (align_->lines() != src_.lines()) {
      throw std::invalid_argument(label_ + " split: '" + join_paths(files_.align) + "' has " +
                                  std::to_string(align_->lines()) + " alignment lines but '" +
                                  join_paths(files_.src) + "' has " + std::to_string(src_.lines()) +
                                  " lines; expected one alignment line per sentence pair");
    }
  }
  throw std::invalid_argument(label_ + " split: '" + join_paths(files_.src) + "' has " +
                              std::to_string(src_.lines()) + " lines but '" +
                              join_paths(files_.tgt) + "' has " + std::to_string(tgt_.lines()) +
                              "; expected one target line per source line");
}

}  // namespace tandem::data
