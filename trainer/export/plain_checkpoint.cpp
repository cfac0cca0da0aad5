#include "trainer/export/plain_checkpoint.h"

namespace tandem::exporter {

checkpoint::CheckpointData plain_checkpoint(const checkpoint::InferenceModel& model) {
  config::Config config = model.config;
  config.lora = config::LoraConfig{};
  checkpoint::CheckpointData out;
  out.step = model.step;
  out.config_yaml = config::to_yaml(config);
  out.vocab = model.vocab.bytes();
  for (const auto& [name, weight] : checkpoint::named_parameters(model.model)) {
    out.model.emplace_back(name, weight.detach().to(torch::kCPU, torch::kFloat32).contiguous());
  }
  return out;
}

}  // namespace tandem::exporter
