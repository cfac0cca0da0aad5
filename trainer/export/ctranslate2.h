// A Tandem model as a CTranslate2 model folder: TransformerSpec's variables (model.bin), its
// config.json, the shared vocabulary and the SentencePiece model, so that CTranslate2 translates
// as tandem-decode does with nothing else from Tandem.
#pragma once

#include <string>
#include <vector>

#include "data/shortlist/shortlist.h"
#include "trainer/export/ct2_model_file.h"
#include "trainer/export/export_files.h"
#include "trainer/model_io/model_io.h"

namespace tandem::exporter {

// How the weights are stored, as CTranslate2's converters spell it (--quantization):
// float32; int8 (the matrices of linear layers and embeddings as int8 with one float32 scale per
// row, the rest float32); int8_float16 (the same, the rest float16); float16 (everything).
enum class Ct2Quantization { kFloat32, kInt8, kInt8Float16, kFloat16 };
const std::vector<std::string>& ct2_quantization_names();  // in the enum's order
Ct2Quantization ct2_quantization(const std::string& name);  // std::invalid_argument if unknown

// The model's parameters (as loaded) and its sinusoidal table as TransformerSpec, revision 7:
// embeddings (scaled by sqrt(d_model) there too) with the table as the position encodings, q|k|v
// fused into one self-attention projection and k|v into one for cross-attention, post- or
// pre-norm with the final norms, relu, tied weights stored once and aliased.
// `alignment`: the heads CTranslate2's return_attention averages (its alignment_layer, 0-based
// here, and alignment_heads, the first ones): the heads --alignments reads
// (AlignmentConfig::heads_read).
Ct2Model ct2_transformer(const model::Transformer& model, Ct2Quantization quantization,
                         const model::AlignmentHeads& alignment);

// Writes model.bin, config.json (LayerNorm epsilon, the special tokens, the source's EOS added
// automatically), shared_vocabulary.json, sentencepiece.model and tandem.json into `dir`.
void write_ct2_folder(const checkpoint::InferenceModel& model, Ct2Quantization quantization,
                      const Provenance& provenance, const std::string& dir);

// CTranslate2's vocabulary map of `shortlist` (data/shortlist/shortlist.h) at `path`, the vmap.txt
// that translate_batch(use_vmap=True) reads from the model folder: a first line holding the
// frequent target pieces under the empty source, then per source piece with a list
// "piece<TAB>targets", every piece spelled as the vocabulary spells it. std::invalid_argument when
// the shortlist was built on another vocabulary.
void write_ct2_vmap(const data::Shortlist& shortlist, const data::Vocab& vocab,
                    const std::string& path);

}  // namespace tandem::exporter
