// LoRA on a Transformer (Hu et al. 2021): adapters beside the layers a list of names picks, every
// other parameter frozen; and the adapters merged back into the weights they sit beside.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "trainer/model/adapter.h"
#include "trainer/model/transformer.h"

namespace tandem::model {

// Layer names as lora.targets writes them: comma-separated.
std::vector<std::string> lora_targets(const std::string& text);

// Gives each attention projection and feed-forward layer whose dotted path (e.g.
// decoder.layers.1.cross_attn.q_proj) is one of `targets` or ends in "." and one an adapter (its
// parameters <path>.lora_a and <path>.lora_b), and freezes every other parameter of the model.
// Returns the adapted paths in the model's order. std::invalid_argument naming a target that
// matches no such layer of the model.
std::vector<std::string> add_adapters(Transformer& model, const std::vector<std::string>& targets,
                                      const AdapterOptions& options);

// Whether `name` is an adapter's parameter (<path>.lora_a or <path>.lora_b).
bool is_adapter_parameter(const std::string& name);

// Adds scale · B A to <path>.weight for each <path>.lora_a (A) and <path>.lora_b (B) among
// `adapters`, in float32 whatever the weight's type. Every adapter is checked before any weight
// changes: std::invalid_argument naming an adapter whose layer the model lacks, whose partner is
// missing, or whose shape does not fit, and the model is then as it was.
void merge_adapters(Transformer& model,
                    const std::vector<std::pair<std::string, torch::Tensor>>& adapters,
                    double scale);

}  // namespace tandem::model
