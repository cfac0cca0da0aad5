// The names of the HDF5 corpus format, once for its writer (corpus_writer) and its reader (corpus):
//   /vocab                               uint8, Vocab::bytes()
//   /<split>/{src,tgt}/{tokens,offsets}  int32 tokens (no BOS/EOS), int64 offsets (n + 1 entries)
//   /<split>/align/{links,offsets}       a split given word alignments: each pair's links between
//                                        its pieces (int32 pairs source piece, target piece, indices
//                                        into its tokens, by target then source), int64 offsets into
//                                        links (n + 1); a pair without links has none
//   /corpora/<name>                      a file of several corpora (format_version 2): attributes
//                                        src_lang, tgt_lang, tag; /corpora/<name>/<split> with
//                                        first and count, and that split's provenance
// Root attributes: format, format_version, vocab_size and how the vocabulary was made.
#pragma once

#include <cstdint>

namespace tandem::data::corpus_format {

inline constexpr const char* kFormatAttribute = "format";  // root attributes
inline constexpr const char* kVersionAttribute = "format_version";
inline constexpr const char* kFormat = "tandem-corpus";  // the value of "format"
inline constexpr int64_t kVersion = 1;                   // a file of one corpus
inline constexpr int64_t kCorporaVersion = 2;            // a file of several (/corpora)

inline constexpr const char* kSplits[] = {"train", "valid", "test"};
inline constexpr const char* kVocab = "vocab";
inline constexpr const char* kSource = "src";
inline constexpr const char* kTarget = "tgt";
inline constexpr const char* kTokens = "tokens";
inline constexpr const char* kOffsets = "offsets";
inline constexpr const char* kAlignment = "align";
inline constexpr const char* kLinks = "links";

inline constexpr const char* kCorpora = "corpora";
inline constexpr const char* kSourceLanguage = "src_lang";  // attributes of /corpora/<name>
inline constexpr const char* kTargetLanguage = "tgt_lang";
inline constexpr const char* kTag = "tag";
inline constexpr const char* kFirst = "first";  // attributes of /corpora/<name>/<split>
inline constexpr const char* kCount = "count";

}  // namespace tandem::data::corpus_format
