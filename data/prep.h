// Raw parallel text → one HDF5 corpus file (tandem-prep): a joint SentencePiece model, every split
// encoded on several threads, bad pairs skipped and counted, memory bounded by a sample.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus_files.h"
#include "data/prep_summary.h"
#include "data/vocab.h"

namespace tandem::data {

// Raw parallel text → one HDF5 corpus file (tandem-prep): trains the joint SentencePiece model on
// a seeded sample of the train split, encodes every split on several threads, skips bad pairs with
// counted reasons, records provenance. Memory is bounded by the sample and the encoding chunks,
// not by the corpus: the text is streamed twice (sample, then encode), the token arrays go through
// temporary files next to the output.

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
  // The one corpus's languages (of `splits`), for a vocabulary with language codes (NLLB-200's
  // eng_Latn, M2M-100's en): its sources start with the source's code and its targets with the
  // target's, as the model reads and predicts them. Several corpora give theirs each.
  std::string src_lang, tgt_lang;
  int64_t max_len = 250;          // pairs with more tokens than this on a side are skipped
  int threads = 0;                // encoding threads; 0 = one per core. The output is the same
                                  // for every count.
  int64_t chunk_pairs = 1 << 16;  // pairs read, then encoded in parallel, at a time
};

// Throws std::invalid_argument for missing or unreadable files (naming the file and line),
// mismatched line counts (naming both sides and counts), or an unwritable output; never leaves a
// partial `out` or a temporary file behind.
PrepSummary prepare_corpus(const PrepOptions& options);

}  // namespace tandem::data
