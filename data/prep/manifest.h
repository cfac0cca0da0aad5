// The corpora manifest of tandem-prep --corpora: several corpora, each a direction with its own
// files, prepared into one corpus file (corpus_files.h's CorpusFiles). YAML:
//
//   corpora:
//     - name: en-es            # letters, digits, '.', '_', '-'
//       src_lang: en
//       tgt_lang: es
//       train: {src: train.en, tgt: train.es}   # a file, or a list of files, per side
//       valid: {src: valid.en, tgt: valid.es}   # valid and test are optional; each may give
//                                               # align: word alignments (Pharaoh i-j)
//       test: {src: [test.en], tgt: [test.es]}
//     - name: es-en
//       ...
//
// A relative path is relative to the manifest's folder.
#pragma once

#include <string>
#include <vector>

#include "data/prep/corpus_files.h"

namespace tandem::data {

// std::invalid_argument naming the manifest, the line and column, and the corpus and key at
// fault: a missing or unknown key, a value of the wrong kind. What prepare_corpus checks itself
// (names, languages, splits) is left to it.
std::vector<CorpusFiles> read_corpora_manifest(const std::string& path);

}  // namespace tandem::data
