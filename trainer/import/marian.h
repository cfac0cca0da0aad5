// A Hugging Face MarianMT (OPUS-MT) model folder as a Tandem checkpoint (tandem-import): its
// config.json as Tandem's model options, its source.spm, target.spm and vocab.json as a paired
// vocabulary, its weights (model.safetensors, or pytorch_model.bin) under Tandem's names, with the
// ids renumbered once into Tandem's order.
#pragma once

#include <string>

#include "trainer/import/imported_model.h"

namespace tandem::importer {

// Reads folder `dir`. Tandem's id table is <pad> <unk> <s> </s>, then Marian's other pieces in
// Marian's order: <s> (the decoder's first input) takes the row of Marian's pad, which is Marian's
// decoder_start_token_id, and Tandem's own pad row a copy of it whose output bias is -1e9, so the
// softmax counts Marian's pad once, as Marian's does. std::invalid_argument, one line naming the
// folder, file or key, for: a folder that is not a MarianMT model, a missing file, and a config
// this model cannot compute as Marian does (pre-norm, an activation other than swish or relu,
// unscaled embeddings, untied or separate decoder embeddings, ...).
ImportedModel import_marian(const std::string& dir);

}  // namespace tandem::importer
