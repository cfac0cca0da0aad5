// Building the model a config describes, and moving its parameters in and out of checkpoints.
// tandem-train, tandem-eval and tandem-decode all go through here, so a checkpoint is read one way.
#pragma once

#include <string>
#include <vector>

#include "data/vocab/vocab.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/decode/ensemble.h"
#include "trainer/model/adapter.h"
#include "trainer/model/frozen_base.h"
#include "trainer/model/transformer.h"

namespace tandem::checkpoint {

model::TransformerOptions model_options(const config::ModelConfig& config, int64_t vocab_size);

// Parameters in registration order (the order every rank uses for flattening and hashing).
checkpoint::NamedTensors named_parameters(const model::Transformer& model);
// Those that train (all but a LoRA model's frozen base), in the same order: what the optimizer,
// the moving average, the gradient reducer and a training checkpoint's /model hold.
checkpoint::NamedTensors trainable_parameters(const model::Transformer& model);

// LoRA's adapters as lora.* configures them.
model::AdapterOptions adapter_options(const config::LoraConfig& lora);

// How lora.base_precision holds a base's weight matrices.
model::HeldAs held_as(config::BasePrecision precision);

// A LoRA base (lora.base): the checkpoint whose /model the model's frozen parameters (all but
// the adapters) are read from, a tensor at a time, each weight matrix held `as` says
// (model::hold_frozen; the parameters may be hollow: model::hollow_parameters). Returns the content
// hash of the weights read (fnv1a_words over their float32 values in the model's order, 16 hex
// digits) and the base's vocabulary. std::invalid_argument naming the base for a missing or
// damaged file, other names or shapes, or another activation or position layout.
struct LoraBase {
  std::string hash;
  std::string vocab;  // its bytes
};
LoraBase read_lora_base(const std::string& path, model::Transformer& model, model::HeldAs as);

// Copies checkpoint tensors into the model's parameters after checking names and shapes
// (std::invalid_argument naming `path` and the first differences).
void load_parameters(model::Transformer& model, const checkpoint::NamedTensors& params,
                     const std::string& path);

// Which of a checkpoint's weights to translate with: the moving average when it holds one (the
// default, as validation during training used it), or the weights as the last step left them.
enum class Weights { kAverage, kRaw };

// A lower bound of the parameters a model of `config` has (its weight matrices: one embedding, each
// layer's attention and feed-forward), to compare with a checkpoint before building the model.
int64_t parameters_at_least(const config::ModelConfig& config, int64_t vocab_size);

// A model ready for evaluation or decoding (eval mode), with its config and vocabulary. A LoRA
// checkpoint's model is its base (lora.base, read in float32) with the adapters merged into the
// weights: std::invalid_argument naming both files when the base is missing or its content is
// not the content the adapters were trained on (the checkpoint's lora_base_hash).
struct InferenceModel {
  config::Config config;
  data::Vocab vocab;
  model::Transformer model{nullptr};
  int64_t step = 0;
  bool averaged = false;  // the weights are the checkpoint's moving average (/ema)
};
InferenceModel load_for_inference(const std::string& checkpoint_path,
                                  Weights weights = Weights::kAverage);

// Checkpoints that translate together (several --checkpoint in tandem-decode and tandem-eval):
// each loaded as load_for_inference does, weighted by `weights` (one per checkpoint, scaled to sum
// to 1; empty: equal). They must share one vocabulary, byte for byte: std::invalid_argument naming
// both files otherwise. One checkpoint is an ensemble of one.
struct InferenceEnsemble {
  std::vector<InferenceModel> members;  // in the order given; members[0]'s vocabulary is all's
  decode::Ensemble ensemble;
};
InferenceEnsemble load_ensemble(const std::vector<std::string>& checkpoint_paths,
                                std::vector<double> weights, Weights which = Weights::kAverage);

}  // namespace tandem::checkpoint
