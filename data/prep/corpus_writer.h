// The HDF5 corpus file tandem-prep writes (layout: corpus_format.h): every split of every corpus
// streamed through the encoder into it, with provenance and figures as attributes.
#pragma once

#include <string>
#include <vector>

#include "data/prep/corpus_files.h"
#include "data/prep/prep_options.h"
#include "data/prep/prep_summary.h"
#include "data/vocab/vocab.h"

namespace tandem::data {

// Encodes and writes every split of `corpora` into a new HDF5 file at `path` (truncated if it
// exists): the splits in the order given for one corpus (options.corpora empty); train, valid,
// test for several, each over the corpora that have it, their sources starting with their target
// language's tag when `tags` (the vocabulary's pieces) is not empty. Each split's figures go into
// `summary`, and with several corpora each corpus's too.
void write_corpus(const std::string& path, const Vocab& vocab, const PrepOptions& options,
                  const std::vector<CorpusFiles>& corpora, const std::vector<std::string>& tags,
                  PrepSummary& summary);

}  // namespace tandem::data
