// The special token ids Tandem reserves at the start of every vocabulary (the SentencePiece model
// is trained with them, data/vocab/vocab.cpp): one definition for data/, model/ and decode/.
#pragma once

#include <cstdint>

namespace tandem {

constexpr int64_t kPadId = 0;  // padding: masked in attention, ignored by the loss
constexpr int64_t kUnkId = 1;  // a piece the vocabulary lacks
constexpr int64_t kBosId = 2;  // the decoder's first input
constexpr int64_t kEosId = 3;  // ends every source and target sequence

}  // namespace tandem
