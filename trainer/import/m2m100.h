// A Hugging Face M2M-100 or NLLB-200 model folder (config.json's model_type "m2m_100") as a
// Tandem checkpoint (tandem-import): a pre-norm Transformer with final LayerNorms, embeddings
// scaled by sqrt(d_model), fairseq's sinusoidal positions, ReLU and tied embeddings, whose
// sequences start with a language code (NLLB's "eng_Latn", M2M-100's "__en__").
#pragma once

#include <string>

#include "trainer/import/imported_model.h"

namespace tandem::importer {

// Reads folder `dir`: config.json; the weights (model.safetensors, pytorch_model.bin, or either
// sharded with its *.index.json); sentencepiece.bpe.model; and the tokenizer's files: NLLB's
// tokenizer.json or tokenizer_config.json (the ids of the language codes and <mask>), M2M-100's
// vocab.json (the ids of the pieces), and tokenizer_config.json / special_tokens_map.json (which
// tokens are language codes).
//
// The ids are the model's, but for its four specials, which Tandem fixes (pad 0, unk 1, the
// decoder's start 2, eos 3: its batches, loss and search rely on them): the model's <pad>, <unk>
// and </s> take Tandem's, Tandem's start (2) is a copy of the </s> row (the model's
// decoder_start_token_id) whose output bias is -1e9, so that the softmax counts </s> once, and the
// model's <s> (id 0, which the current tokenizers never produce) moves to the end of the table.
// Every other id, language codes included, is the model's own.
//
// std::invalid_argument, one line naming the folder, file or key, for: a missing file, a config
// this model cannot compute as transformers does (post-norm, unscaled or untied embeddings, an
// activation other than relu or swish, a decoder start other than </s>), a config whose shapes
// are not the weights', a missing or mismatched index shard, and a tokenizer without language
// codes.
ImportedModel import_m2m100(const std::string& dir);

}  // namespace tandem::importer
