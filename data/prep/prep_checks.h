// tandem-prep's options checked before any file is read: split names, corpus names and language
// codes, sizes and counts.
#pragma once

#include "data/prep/prep_options.h"

namespace tandem::data {

// std::invalid_argument naming the split, corpus, option or value at fault: a split other than
// train, valid or test, or given twice, or without both sides; no train split; both one corpus's
// splits and several corpora, or neither; a corpus name or language code that is not a word, or a
// name given twice; an empty output path; max_len, chunk_pairs, threads or the vocabulary sample
// out of range.
void check_prep_options(const PrepOptions& options);

}  // namespace tandem::data
