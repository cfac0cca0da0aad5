// Words as word aligners count them (eflomal, fast_align, the Pharaoh "i-j" format): the runs of a
// line's bytes between white space, numbered from 0; and which word each SentencePiece piece of
// the line belongs to, from the bytes the piece comes from.
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

}  // namespace tandem::data
