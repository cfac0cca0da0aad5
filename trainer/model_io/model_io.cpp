#include "trainer/model_io/model_io.h"

#include <limits>
#include <stdexcept>
#include <utility>

#include "trainer/common/fnv_hash.h"
#include "trainer/model/lora.h"

namespace tandem::checkpoint {

model::TransformerOptions model_options(const config::ModelConfig& config, int64_t vocab_size) {
  model::TransformerOptions options;
  options.vocab_size = vocab_size;
  options.d_model = config.d_model;
  options.heads = config.heads;
  options.encoder_layers = config.encoder_layers;
  options.decoder_layers = config.decoder_layers;
  options.d_ff = config.d_ff;
  options.dropout = config.dropout;
  options.pre_norm = config.pre_norm;
  options.tie_embeddings = config.tie_embeddings;
  options.max_positions = config.max_positions;
  options.activation = config.activation == config::Activation::kSwish ? model::Activation::kSwish
                                                                       : model::Activation::kRelu;
  switch (config.positions) {
    case config::PositionLayout::kInterleaved:
      options.positions = model::PositionLayout::kInterleaved;
      break;
    case config::PositionLayout::kHalves:
      options.positions = model::PositionLayout::kHalves;
      break;
    case config::PositionLayout::kFairseq:
      options.positions = model::PositionLayout::kFairseq;
      break;
  }
  return options;
}

checkpoint::NamedTensors named_parameters(const model::Transformer& model) {
  checkpoint::NamedTensors out;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    out.emplace_back(item.key(), item.value());
  }
  return out;
}

checkpoint::NamedTensors trainable_parameters(const model::Transformer& model) {
  checkpoint::NamedTensors out;
  for (const auto& item : model->named_parameters(/*recurse=*/true)) {
    if (item.value().requires_grad()) out.emplace_back(item.key(), item.value());
  }
  return out;
}

model::AdapterOptions adapter_options(const config::LoraConfig& lora) {
  return model::AdapterOptions{lora.rank, lora.alpha, lora.dropout};
}

model::HeldAs held_as(config::BasePrecision precision) {
  switch (precision) {
    case config::BasePrecision::kBf16:
      return model::HeldAs::kBf16;
    case config::BasePrecision::kInt8:
      return model::HeldAs::kInt8;
    case config::BasePrecision::kFp32:
      break;
  }
  return model::HeldAs::kFp32;
}

LoraBase read_lora_base(const std::string& path, model::Transformer& model, model::HeldAs as) {
  checkpoint::NamedTensors base;
  for (const auto& [name, param] : named_parameters(model)) {
    if (!model::is_adapter_parameter(name)) base.emplace_back(name, param);
  }
  const auto outline = checkpoint::load_outline(path);
  const auto saved = model_options(
      config::parse_config(outline.config_yaml, "checkpoint '" + path + "' /config").model, 0);
  const auto& own = model->options();
  if (saved.activation != own.activation || saved.positions != own.positions ||
      saved.pre_norm != own.pre_norm) {
    throw std::invalid_argument("LoRA base '" + path +
                                "' computes another function than this "
                                "config's model (model.activation, model.positions or "
                                "model.pre_norm differ)");
  }
  checkpoint::check_compatible(path, outline.model, base);
  const auto layers = model->named_modules();
  checkpoint::GroupReader reader(path, "model");
  uint64_t hash = kFnvOffsetBasis;
  for (const auto& [name, param] : base) {
    const auto value = reader.read(name).to(torch::kFloat32).contiguous();
    hash = fnv1a_words(value.data_ptr(), value.nbytes(), hash);
    const size_t dot = name.rfind('.');
    const std::string layer = dot == std::string::npos ? "" : name.substr(0, dot);
    model::hold_frozen(*layers[layer], name.substr(dot + 1), value, as);
  }
  return {hash_text(hash), outline.vocab};
}

void load_parameters(model::Transformer& model, const checkpoint::NamedTensors& params,
                     const std::string& path) {
  auto own = named_parameters(model);
  checkpoint::check_compatible(path, params, own);
  torch::NoGradGuard no_grad;
  std::map<std::string, torch::Tensor> by_name(params.begin(), params.end());
  for (auto& [name, tensor] : own) tensor.copy_(by_name.at(name));
}

int64_t parameters_at_least(const config::ModelConfig& m, int64_t vocab_size) {
  // In long double: a crafted config's sizes can overflow any integer type.
  const long double d = m.d_model, ff = m.d_ff;
  const long double bound = vocab_size * d + m.encoder_layers * (4 * d * d + 2 * d * ff) +
                            m.decoder_layers * (8 * d * d + 2 * d * ff);
  return bound > 9e18L ? std::numeric_limits<int64_t>::max() : static_cast<int64_t>(bound);
}

namespace {

// A LoRA checkpoint's model: its base in float32 with the adapters of `group` merged in.
model::Transformer merged_lora_model(const std::string& checkpoint_path, const std::string& group,
                                     const config::Config& config, const data::Vocab& vocab,
                                     const std::string& trained_hash) {
  const int64_t vocab_size = vocab.size();
  model::TransformerOptions options = model_options(config.model, vocab_size);
  options.on_part_built = model::hollow_parameters;
  model::Transformer model(options);
  const std::string& base_path = config.lora.base;
  const std::string named = "checkpoint '" + checkpoint_path + "' holds LoRA adapters on base '" +
                            base_path + "' (lora.base)";
  LoraBase base;
  try {
    base = read_lora_base(base_path, model, model::HeldAs::kFp32);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(named + ", which cannot serve: " + e.what());
  }
  if (base.vocab != vocab.bytes()) {
    throw std::invalid_argument(named + ", but the base's vocabulary is another");
  }
  if (base.hash != trained_hash) {
    throw std::invalid_argument(named + " with content hash " + trained_hash + ", but '" +
                                base_path + "' now holds other weights (content hash " + base.hash +
                                ")");
  }
  checkpoint::NamedTensors adapters;
  const auto outline = checkpoint::load_outline(checkpoint_path);
  checkpoint::GroupReader reader(checkpoint_path, group);
  for (const auto& [name, shape] : group == "ema" ? outline.ema : outline.model) {
    adapters.emplace_back(name, reader.read(name));
  }
  try {
    model::merge_adapters(model, adapters,
                          config.lora.alpha / static_cast<double>(config.lora.rank));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("checkpoint '" + checkpoint_path + "' /" + group + ": " + e.what());
  }
  return model;
}

}  // namespace

InferenceModel load_for_inference(const std::string& checkpoint_path, Weights weights) {
  const auto data = checkpoint::load_description(checkpoint_path);
  InferenceModel out{config::parse_config(data.config_yaml, checkpoint_path + " /config"),
                     data::Vocab::from_bytes(data.vocab), nullptr, data.step};
  out.averaged = weights == Weights::kAverage && data.holds_ema;
  const std::string group = out.averaged ? "ema" : "model";
  if (!out.config.lora.base.empty()) {
    out.model =
        merged_lora_model(checkpoint_path, group, out.config, out.vocab, data.lora_base_hash);
    out.model->eval();
    return out;
  }
  // The model is built (allocated) before its shapes are compared with the file's: a /config that
  // describes a far larger model than the file holds is refused first.
  const int64_t needed = parameters_at_least(out.config.model, out.vocab.size());
  const int64_t stored = checkpoint::stored_elements(checkpoint_path, group);
  if (needed > stored) {
    throw std::invalid_argument("checkpoint '" + checkpoint_path +
                                "': its /config describes a "
                                "model of at least " +
                                std::to_string(needed) + " parameters, but /" + group + " holds " +
                                std::to_string(stored) + " values");
  }
  out.model = model::Transformer(model_options(out.config.model, out.vocab.size()));
  // Straight into the parameters: no second copy of the weights is allocated and touched.
  checkpoint::read_parameters(checkpoint_path, group, named_parameters(out.model));
  out.model->eval();
  return out;
}

InferenceEnsemble load_ensemble(const std::vector<std::string>& checkpoint_paths,
                                std::vector<double> weights, Weights which) {
  if (checkpoint_paths.empty()) throw std::invalid_argument("no checkpoint to load");
  if (weights.empty()) weights.assign(checkpoint_paths.size(), 1.0);
  std::vector<InferenceModel> members;
  std::vector<model::Transformer> models;
  for (const auto& path : checkpoint_paths) {
    members.push_back(load_for_inference(path, which));
    if (members.back().vocab.bytes() != members.front().vocab.bytes()) {
      throw std::invalid_argument("checkpoint '" + path + "' has another vocabulary than '" +
                                  checkpoint_paths.front() +
                                  "': the checkpoints of an ensemble must share one "
                                  "SentencePiece model");
    }
    models.push_back(members.back().model);
  }
  decode::Ensemble ensemble(std::move(models), std::move(weights));
  return {std::move(members), std::move(ensemble)};
}

}  // namespace tandem::checkpoint
