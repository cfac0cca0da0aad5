// Encoding raw pairs for tandem-prep: a chunk of pairs cut into contiguous slices, each encoded on
// a thread of its own, with a verdict per pair (kept, or why it is skipped).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "data/pair_reader.h"
#include "data/vocab.h"

namespace tandem::data {

// What encoding decided for a slice of a chunk of pairs: a verdict per pair, and the kept pairs'
// tokens (flat) and lengths.
struct EncodedSlice {
  std::vector<Verdict> verdicts;
  std::vector<int32_t> src_tokens, tgt_tokens;
  std::vector<int64_t> src_lengths, tgt_lengths;
};

// The tokens a corpus's sentences start with (-1: none): a source's target-language tag
// (">>es<<"), or a model with language codes' source and target codes (NLLB-200's eng_Latn ...).
struct SentencePrefixes {
  int32_t src = -1;
  int32_t tgt = -1;
};

// Encodes `count` pairs on up to `threads` threads, each a contiguous slice (the calling thread
// takes the first): the slices in order are the same whatever the thread count. Each side gets
// its prefix (>= 0) as its first token; max_len counts it.
std::vector<EncodedSlice> encode_chunk(const Vocab& vocab, int64_t max_len,
                                       SentencePrefixes prefixes, const RawPair* pairs,
                                       size_t count, int threads);

}  // namespace tandem::data
