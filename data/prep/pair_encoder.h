// Encoding raw pairs for tandem-prep: a chunk of pairs cut into contiguous slices, each encoded on
// a thread of its own, with a verdict per pair (kept, or why it is skipped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/language_marks.h"
#include "data/prep/pair_reader.h"
#include "data/vocab/vocab.h"

namespace tandem::data {

// What encoding decided for a slice of a chunk of pairs: a verdict per pair, and the kept pairs'
// tokens (flat) and lengths; with alignments, the kept pairs' piece links too (alignment.h's
// piece_links, after the language marks: flat pairs, and each pair's count of values), and the
// first alignment line that is wrong, which stops the slice.
struct EncodedSlice {
  std::vector<Verdict> verdicts;
  std::vector<int32_t> src_tokens, tgt_tokens;
  std::vector<int64_t> src_lengths, tgt_lengths;
  std::vector<int32_t> links;
  std::vector<int64_t> link_lengths;
  int64_t bad_alignment = -1;  // the slice's pair whose line is wrong, and why
  std::string alignment_error;
};

// The most link values (two a link) a pair may have: the corpus reader's limit for a sentence.
inline constexpr int64_t kMaxLinkValues = 65534;

// Encodes `count` pairs on up to `threads` threads, each a contiguous slice (the calling thread
// takes the first): the slices in order are the same whatever the thread count. Each side gets
// the token its language marks start it with (data/corpus/language_marks.h); max_len counts it.
// An aligned pair's links are mapped to its pieces.
std::vector<EncodedSlice> encode_chunk(const Vocab& vocab, int64_t max_len,
                                       const LanguageMarks& marks, const RawPair* pairs,
                                       size_t count, int threads);

}  // namespace tandem::data
