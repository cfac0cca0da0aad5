// What Tandem checks of a SentencePiece model's bytes before SentencePiece reads them (a model
// comes with corpus and checkpoint files, and with MarianMT folders from elsewhere). SentencePiece
// parses the protobuf safely, but trusts the normalization table inside it (NormalizerSpec's
// precompiled_charsmap: a double-array trie and the strings it maps to) and indexes it unchecked
// on every string it tokenizes: a damaged or crafted table reads outside its bytes (found by
// tests/fuzz/vocab_fuzz.cpp as a SEGV inside libsentencepiece).
#pragma once

#include <string>

namespace tandem::data {

// "" when every normalization table in `model` (of the normalizer and the denormalizer, however
// often the protobuf repeats them) keeps every lookup inside its bytes; else what is wrong.
// Models whose protobuf this cannot follow (a group, a field cut short) are refused as well.
std::string sentencepiece_table_problem(const std::string& model);

}  // namespace tandem::data
