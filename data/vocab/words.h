// Words as word aligners count them (eflomal, fast_align, the Pharaoh "i-j" format): the runs of a
// line's bytes between white space, numbered from 0; which word each SentencePiece piece of the
// line belongs to, from the bytes the piece comes from; and word links and word-to-word attention
// from piece attention.
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

// How much each target word attended to each source word: a matrix of target words by source
// words. From piece attention (word_attention) it is soft; from hard links (links_as_attention),
// 1 where linked and 0 elsewhere.
struct WordAttention {
  int64_t source_words = 0, target_words = 0;
  std::vector<float> weights = {};  // [target_words][source_words], row-major
  float at(int64_t target, int64_t source) const {
    return weights[static_cast<size_t>(target * source_words + source)];
  }
};

// From a translation's piece attention: `rows` holds, for target piece j, its attention over the
// `positions` source positions (row j at rows[j * positions]). Target word t's row is the mean,
// over its pieces, of each source word's summed attention (over that word's pieces). Pieces of no
// word (-1, as in word_links) and positions past source_words count for no word. The matrix has
// max(word) + 1 rows and columns.
WordAttention word_attention(const std::vector<int32_t>& source_words,
                             const std::vector<int32_t>& target_words,
                             const std::vector<float>& rows, int64_t positions);

// Hard links as a WordAttention of `source_words` by `target_words` words (links outside ignored).
WordAttention links_as_attention(const std::vector<WordLink>& links, int64_t source_words,
                                 int64_t target_words);

// "0-0 1-2 2-1": Pharaoh's format, as eflomal and fast_align write it.
std::string pharaoh(const std::vector<WordLink>& links);

}  // namespace tandem::data
