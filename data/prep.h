// Raw parallel text → one HDF5 corpus file (tandem-prep): a joint SentencePiece model, every split
// encoded on several threads, bad pairs skipped and counted, memory bounded by a sample.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "data/vocab.h"

namespace tandem::data {

// Raw parallel text → one HDF5 corpus file (tandem-prep): trains the joint SentencePiece model on
// a seeded sample of the train split, encodes every split on several threads, skips bad pairs with
// counted reasons, records provenance. Memory is bounded by the sample and the encoding chunks,
// not by the corpus: the text is streamed twice (sample, then encode), the token arrays go through
// temporary files next to the output.

struct SplitFiles {
  std::string name;              // "train", "valid" or "test"
  std::vector<std::string> src;  // one sentence per line; several files are read in order,
                                 // each plain or gzip-compressed
  std::vector<std::string> tgt;  // as many lines as src, together
};

// One corpus of several in one file: a direction (source and target language) with its splits.
// Its pairs follow the previous corpus's in each split's arrays; the file records where.
struct CorpusFiles {
  std::string name;                // letters, digits, '.', '_', '-'; unique in the file
  std::string src_lang, tgt_lang;  // language codes, as in the tag ">>es<<"
  std::vector<SplitFiles> splits;  // train is required
};

struct PrepOptions {
  // One corpus (the file as Tandem always wrote it: no languages, no tags), or several (corpora;
  // then splits is empty). With several target languages among the corpora, the vocabulary has
  // a tag ">>xx<<" per target language as a piece of its own, and every source sentence starts
  // with its corpus's tag, as in Marian's and OPUS-MT's multilingual models.
  std::vector<SplitFiles> splits;  // train is required
  std::vector<CorpusFiles> corpora;
  std::string out;          // the corpus file to write (atomically: *.tmp then rename)
  VocabTrainOptions vocab;  // its input_sentence_size is the sample (sentences, both sides)
  // A vocabulary to use instead (Vocab::bytes(): e.g. an imported model's, to fine-tune it on this
  // corpus), and where it came from; empty: train one with `vocab`.
  std::string vocab_bytes;
  std::string vocab_from;
  int64_t max_len = 250;          // pairs with more tokens than this on a side are skipped
  int threads = 0;                // encoding threads; 0 = one per core. The output is the same
                                  // for every count.
  int64_t chunk_pairs = 1 << 16;  // pairs read, then encoded in parallel, at a time
};

struct SplitSummary {
  std::string name;
  int64_t lines = 0;                       // pairs read
  int64_t kept = 0;                        // pairs written
  std::map<std::string, int64_t> dropped;  // reason ("empty", "too_long", "invalid_utf8") → pairs
  int64_t src_tokens = 0;
  int64_t tgt_tokens = 0;
  // Where the first skipped pairs were, with why: "line 7 of 'train.de': invalid_utf8".
  std::vector<std::string> first_skipped;
};

struct PrepSummary {
  int64_t vocab_size = 0;
  std::vector<SplitSummary> splits;  // each split's totals over the corpora
  // With several corpora: each one's name and its splits' figures, in the order given.
  std::vector<std::pair<std::string, std::vector<SplitSummary>>> corpora;
  // The language tags the source sentences start with, and their ids: (">>es<<", 4), ...
  std::vector<std::pair<std::string, int32_t>> tags;
  std::string to_string() const;  // the summary tandem-prep prints
};

// Throws std::invalid_argument for missing or unreadable files (naming the file and line),
// mismatched line counts (naming both sides and counts), or an unwritable output; never leaves a
// partial `out` or a temporary file behind.
PrepSummary prepare_corpus(const PrepOptions& options);

}  // namespace tandem::data
