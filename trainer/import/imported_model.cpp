#include "trainer/import/imported_model.h"

#include <stdexcept>
#include <utility>
#include <vector>

#include "trainer/model/transformer.h"
#include "trainer/model_io/model_io.h"

namespace tandem::importer {

ImportedModel imported_model(const std::string& dir, config::Config config,
                             const data::Vocab& vocab, PendingTensors named, std::string summary) {
  // In the order and under the names of Tandem's model of these options: its layout alone, built a
  // part at a time, as a model too large to build in float32 would be.
  model::TransformerOptions options = checkpoint::model_options(config.model, vocab.size());
  options.on_part_built = model::hollow_parameters;
  const model::Transformer model(options);
  ImportedModel out;
  std::vector<Pending> pending;  // in the model's order
  for (const auto& [name, param] : checkpoint::named_parameters(model)) {
    const auto it = named.find(name);
    if (it == named.end())
      throw std::logic_error("import: no tensor for Tandem's parameter " + name);
    out.checkpoint.model.emplace_back(
        name, torch::empty(it->second.shape, torch::TensorOptions().device(torch::kMeta)));
    pending.push_back(std::move(it->second));
  }
  checkpoint::check_compatible(dir, out.checkpoint.model, checkpoint::named_parameters(model));
  out.checkpoint.fetch = [pending = std::move(pending)](const std::string& group, size_t index) {
    if (group != "model") throw std::logic_error("import: no group " + group + " to fetch");
    return pending.at(index).make();
  };
  config.data.corpus = "(none: imported from " + dir + "; set data.corpus)";
  out.checkpoint.config_yaml = config::to_yaml(config);
  out.checkpoint.vocab = vocab.bytes();
  out.summary = std::move(summary);
  return out;
}

}  // namespace tandem::importer
