// CTranslate2's model.bin: named tensors and aliases in its binary format (version 6), which
// CTranslate2's loader reads (src/models/model.cc there; written by its Python ModelSpec).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::exporter {

// One variable: a CPU tensor of float32, float16, bfloat16, int8, int16 or int32; 0-dim for the
// scalars a spec declares (e.g. "encoder/num_heads" as int16).
struct Ct2Variable {
  std::string name;  // slash-separated scope, e.g. "decoder/layer_0/ffn/linear_0/weight"
  torch::Tensor value;
};

// A second name for a variable (tied weights are stored once). The loader also aliases
// <alias>_scale to <target>_scale, so a quantized weight's scale follows it.
struct Ct2Alias {
  std::string alias, target;
};

struct Ct2Model {
  std::string spec;       // the loader's model class, e.g. "TransformerSpec"
  uint32_t revision = 1;  // that spec's revision (the loader refuses a newer one than it knows)
  std::vector<Ct2Variable> variables;
  std::vector<Ct2Alias> aliases;
};

// Writes `model` to `path`, variables in name order as CTranslate2's converters do.
// std::invalid_argument for a variable the format cannot hold (dtype, rank > 255, a dimension or
// its payload over 4 GiB - 1 bytes); std::runtime_error naming `path` when writing fails.
void write_ct2_model(const std::string& path, const Ct2Model& model);

}  // namespace tandem::exporter
