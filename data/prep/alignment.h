// Word alignments beside a corpus, as eflomal and fast_align write them (Pharaoh format: "i-j" per
// link, source word i and target word j counted from 0 over the white-space separated words of the
// raw lines, data/vocab/words.h), and the links between pieces they give: every piece of a word
// inherits the word's links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab/words.h"

namespace tandem::data {

// The links of one line of a sentence pair with `src_words` and `tgt_words` words. Throws
// std::invalid_argument saying what is wrong (the caller names the file and line): a field that
// is not "i-j" with whole numbers, or a word past its sentence's.
std::vector<WordLink> parse_pharaoh(const std::string& line, size_t src_words, size_t tgt_words);

// The links between pieces: for each word link i-j, every source piece p of word i with every
// target piece q of word j (src_words[p] is piece p's word, -1 for none, as a language mark's),
// as flat pairs p, q sorted by q, then p, each once.
std::vector<int32_t> piece_links(const std::vector<WordLink>& links,
                                 const std::vector<int32_t>& src_words,
                                 const std::vector<int32_t>& tgt_words);

}  // namespace tandem::data
