// Words as word aligners count them (eflomal, fast_align, the Pharaoh "i-j" format): the runs of a
// line's bytes between white space, numbered from 0; which word each SentencePiece piece of the
// line belongs to, from the bytes the piece comes from; and word links from piece attention.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data {

struct ByteRange {
  size_t begin = 0, end = 0;  // [begin, end)
};

// The words of `text`: the maximal runs between white space as Python's str.split() sees it
// (ASCII white space, U+001C..U+001F, U+0085, U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029,
// U+202F, U+205F, U+3000), which is how eflomal and the aligners' Python tools read a line.
std::vector<ByteRange> split_words(const std::string& text);

// For piece k of a text, from byte begins[k] to ends[k]: the word (an index into `words`) that
// holds its first byte outside white space. A piece with no such byte (SentencePiece's lone "▁")
// takes the word of the piece after it, which it opens, else the one before; -1 when the text has
// no word.
std::vector<int32_t> words_of_pieces(const std::string& text, const std::vector<ByteRange>& words,
                                     const std::vector<uint32_t>& begins,
                                     const std::vector<uint32_t>& ends);

// A link between source word `src` and target word `tgt` (Pharaoh's "src-tgt").
struct WordLink {
  int32_t src = 0, tgt = 0;
  bool operator==(const WordLink& other) const { return src == other.src && tgt == other.tgt; }
};

// A hard word alignment from attention over pieces: target piece j, of target word
// target_words[j], attended most to source piece attended[j], of source word
// source_words[attended[j]]; a piece without a word (-1: a language code or tag, EOS, a position
// outside source_words) gives no link. Each (source word, target word) once, by source word, then
// target word. attended has one entry per target piece (the extra ones are ignored).
std::vector<WordLink> word_links(const std::vector<int32_t>& source_words,
                                 const std::vector<int32_t>& target_words,
                                 const std::vector<int32_t>& attended);

// "0-0 1-2 2-1": Pharaoh's format, as eflomal and fast_align write it.
std::string pharaoh(const std::vector<WordLink>& links);

}  // namespace tandem::data
