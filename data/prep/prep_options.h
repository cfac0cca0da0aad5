// What tandem-prep is asked to do: the corpora or splits, the output, the vocabulary to train or
// use, and the limits (prep.h runs it; its checks and the corpus writer read it).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/prep/corpus_files.h"
#include "data/vocab/vocab.h"

namespace tandem::data {

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
  int threads = 0;                // encoding threads; 0 = one per CPU. The output is the same
                                  // for every count.
  int64_t chunk_pairs = 1 << 16;  // pairs read, then encoded in parallel, at a time
};

}  // namespace tandem::data
