// A lexical shortlist made from a prepared corpus: the translation table of IBM Model 1, trained
// with EM on its train pairs (each target piece from one source piece of its pair, or from none:
// NULL), each source piece's best target pieces kept, and the most frequent target pieces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/shortlist/shortlist.h"

namespace tandem::data {

// IBM Model 1 on `pairs`, over a vocabulary of `vocab_size` ids; `vocab` is the corpus
// vocabulary's bytes, whose hash the shortlist keeps.
Shortlist build_shortlist(const std::vector<SentencePair>& pairs, int64_t vocab_size,
                          const std::string& vocab, const ShortlistOptions& options);

// build_shortlist() on the train split of `corpus`: options.max_pairs of its pairs, evenly spaced
// (all when it has fewer), read a block at a time; std::invalid_argument when it has no train
// pairs.
Shortlist shortlist_from_corpus(const Corpus& corpus, const ShortlistOptions& options);

}  // namespace tandem::data
