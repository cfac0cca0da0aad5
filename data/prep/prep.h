// Raw parallel text → one HDF5 corpus file (tandem-prep): a joint SentencePiece model, every split
// encoded on several threads, bad pairs skipped and counted, memory bounded by a sample.
#pragma once

#include "data/prep/prep_options.h"
#include "data/prep/prep_summary.h"

namespace tandem::data {

// Raw parallel text → one HDF5 corpus file (tandem-prep): trains the joint SentencePiece model on
// a seeded sample of the train split, encodes every split on several threads, skips bad pairs with
// counted reasons, records provenance. Memory is bounded by the sample and the encoding chunks,
// not by the corpus: the text is streamed twice (sample, then encode), the token arrays go through
// temporary files next to the output.
// Throws std::invalid_argument for missing or unreadable files (naming the file and line),
// mismatched line counts (naming both sides and counts), or an unwritable output; never leaves a
// partial `out` or a temporary file behind.
PrepSummary prepare_corpus(const PrepOptions& options);

}  // namespace tandem::data
