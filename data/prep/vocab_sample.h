// The sentences tandem-prep trains a vocabulary on: a seeded uniform sample of the train split's
// usable pairs (both sides), held in memory as the sample only (reservoir sampling); with several
// corpora, one share per language, so that a language with little text still gets its pieces.
#pragma once

#include <string>
#include <vector>

#include "data/prep/corpus_files.h"
#include "data/vocab/vocab.h"

namespace tandem::data {

// One corpus's train split: its sentences, both sides, in one reservoir of input_sentence_size.
// std::invalid_argument naming the files when no pair is usable.
std::vector<std::string> sample_sentences(const SplitFiles& train, const VocabTrainOptions& vocab);

// Several corpora, balanced across languages: each language (a corpus's source side is in its
// source language, its target side in its target language) has a reservoir of its own, an equal
// share of input_sentence_size. The languages' samples follow each other in order of appearance.
// std::invalid_argument naming the corpus when one has no usable pair.
std::vector<std::string> sample_by_language(const std::vector<CorpusFiles>& corpora,
                                            const VocabTrainOptions& vocab);

}  // namespace tandem::data
