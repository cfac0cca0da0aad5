// Raw parallel text → one HDF5 corpus file (tandem-prep): trains the joint SentencePiece model on
// the train split, encodes every split, skips bad pairs with counted reasons, records provenance.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/vocab.h"

namespace tandem::data {

struct SplitFiles {
  std::string name;  // "train", "valid" or "test"
  std::string src;   // one sentence per line
  std::string tgt;   // same number of lines as src
};

struct PrepOptions {
  std::vector<SplitFiles> splits;  // train is required
  std::string out;                 // the corpus file to write (atomically: *.tmp then rename)
  VocabTrainOptions vocab;
  int64_t max_len = 250;           // pairs with more tokens than this on a side are skipped
};

struct SplitSummary {
  std::string name;
  int64_t lines = 0;                      // pairs read
  int64_t kept = 0;                       // pairs written
  std::map<std::string, int64_t> dropped; // reason ("empty", "too_long", "invalid_utf8") → pairs
  int64_t src_tokens = 0;
  int64_t tgt_tokens = 0;
};

struct PrepSummary {
  int64_t vocab_size = 0;
  std::vector<SplitSummary> splits;
  std::string to_string() const;  // the summary tandem-prep prints
};

// Throws std::invalid_argument for missing files, mismatched line counts (naming both files and
// counts), or an unwritable output; never leaves a partial `out` behind.
PrepSummary prepare_corpus(const PrepOptions& options);

}  // namespace tandem::data
