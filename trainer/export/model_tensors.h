// A model's tensors by name, on the CPU in float32, as exporters read them: its parameters and its
// "positions" buffer.
#pragma once

#include <map>
#include <string>

#include "trainer/model/transformer.h"

namespace tandem::exporter {

class ModelTensors {
 public:
  explicit ModelTensors(const model::Transformer& model);
  // std::invalid_argument naming it when the model has no such tensor (a model this exporter does
  // not know).
  const torch::Tensor& operator()(const std::string& name) const;

 private:
  std::map<std::string, torch::Tensor> tensors_;
};

}  // namespace tandem::exporter
