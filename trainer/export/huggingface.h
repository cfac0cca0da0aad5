// A Tandem model as a Hugging Face transformers folder (tandem-export --to huggingface): what
// AutoTokenizer.from_pretrained and AutoModelForSeq2SeqLM.from_pretrained load as they are, with
// no code of Tandem's, and which computes what Tandem computes.
//
// A post-norm model, tied or untied, is a MarianMTModel (model_type "marian"): MarianMT's layers
// are Tandem's post-norm ones, its embeddings are scaled by sqrt(d_model), its output has a bias
// (final_logits_bias), and its sinusoid table has the sines in the first half of the width and the
// cosines in the second (Tandem's "halves"). A pre-norm model with tied embeddings is a
// PegasusForConditionalGeneration: the same, with LayerNorm before each sublayer and at the end of
// each stack, and the table stored with the weights. Tandem's "interleaved" table is the same
// table with the width's coordinates in another order, and nothing else in the model depends on
// that order (LayerNorm, attention and the feed-forward layers treat the residual stream's
// coordinates alike): the export reorders the width of every tensor that touches the residual
// stream, which gives exactly the same function.
// The tokenizer is MarianTokenizer: source.spm, target.spm and vocab.json. A vocabulary Tandem
// trained keeps its ids (<pad> 0, <unk> 1, <s> 2, </s> 3: the decoder starts with <s>); a MarianMT
// model's imported one gets MarianMT's back (</s> 0, <unk> 1, its pieces, <pad> last: the decoder
// starts with <pad>, whose row is Tandem's <s>). A model with fairseq's table (an imported NLLB-200
// or M2M-100) is an M2M100ForConditionalGeneration with NllbTokenizer or M2M100Tokenizer, its ids
// the original folder's.
#pragma once

#include <string>

#include "trainer/export/export_files.h"
#include "trainer/model_io/model_io.h"

namespace tandem::exporter {

// A model with language codes (NLLB-200): the languages its tokenizer starts with (src_lang,
// tgt_lang), and the target's code, which generate() then puts first (forced_bos_token_id), as
// tandem-decode --target-lang does. Empty: none set.
struct HfLanguages {
  std::string source, target;
};

// Writes config.json, generation_config.json (tandem-decode's beam, length penalty and banned
// tokens), model.safetensors, the tokenizer's files (MarianTokenizer's source.spm, target.spm,
// vocab.json; NllbTokenizer's or M2M100Tokenizer's sentencepiece.bpe.model; tokenizer_config.json,
// special_tokens_map.json) and tandem.json into `dir`. First, before any file:
// std::invalid_argument, one line naming the setting and what to train instead, for a model no transformers class
// computes as Tandem does, or a language the model has no code for.
void write_hf_folder(const checkpoint::InferenceModel& model, const HfLanguages& languages,
                     const Provenance& provenance, const std::string& dir);

}  // namespace tandem::exporter
