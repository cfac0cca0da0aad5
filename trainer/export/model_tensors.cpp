#include "trainer/export/model_tensors.h"

#include <stdexcept>

namespace tandem::exporter {

ModelTensors::ModelTensors(const model::Transformer& model) {
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    tensors_[item.key()] = item.value().detach().to(torch::kCPU, torch::kFloat);
  }
  for (const auto& item : model->named_buffers(/*recurse=*/false)) {
    tensors_[item.key()] = item.value().to(torch::kCPU, torch::kFloat);
  }
}

const torch::Tensor& ModelTensors::operator()(const std::string& name) const {
  const auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    throw std::invalid_argument("the model has no tensor '" + name + "' to export");
  }
  return it->second;
}

}  // namespace tandem::exporter
