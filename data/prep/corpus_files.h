// What tandem-prep reads: a split's text files, and a corpus of several in one file (a direction
// with its languages and splits), as the command line or a corpora manifest gives them.
#pragma once

#include <string>
#include <vector>

namespace tandem::data {

struct SplitFiles {
  std::string name;              // "train", "valid" or "test"
  std::vector<std::string> src;  // one sentence per line; several files are read in order,
                                 // each plain or gzip-compressed
  std::vector<std::string> tgt;  // as many lines as src, together
  // Optional: word alignments, line i for pair i (Pharaoh "i-j", data/prep/alignment.h), as
  // many lines as src; an empty line gives its pair no links.
  std::vector<std::string> align = {};
};

// One corpus of several in one file: a direction (source and target language) with its splits.
// Its pairs follow the previous corpus's in each split's arrays; the file records where.
struct CorpusFiles {
  std::string name;                // letters, digits, '.', '_', '-'; unique in the file
  std::string src_lang, tgt_lang;  // language codes, as in the tag ">>es<<"
  std::vector<SplitFiles> splits;  // train is required
};

}  // namespace tandem::data
