#include "trainer/model/lora.h"

#include <map>
#include <sstream>
#include <stdexcept>

namespace tandem::model {
namespace {

constexpr const char* kA = ".lora_a";
constexpr const char* kB = ".lora_b";

bool ends_with(const std::string& text, const std::string& tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

// peft's target_modules: the path itself, or a tail of it after a dot.
bool matches(const std::string& path, const std::string& target) {
  return path == target || ends_with(path, "." + target);
}

// Gives an adapter to each projection of `layer` (at `prefix`) whose path a target matches, adding
// the path to `adapted` and marking which targets matched in `used`.
template <typename Layer>
void adapt_layer(Layer& layer, const std::string& prefix, const std::vector<std::string>& targets,
                 const AdapterOptions& options, std::vector<bool>& used,
                 std::vector<std::string>& adapted) {
  for (const auto& projection : Layer::projections()) {
    const std::string path = prefix + "." + projection;
    bool hit = false;
    for (size_t t = 0; t < targets.size(); ++t) {
      if (matches(path, targets[t])) used[t] = hit = true;
    }
    if (!hit) continue;
    layer.add_adapter(projection, options);
    adapted.push_back(path);
  }
}

// A layer's adapter: A [r, in] and B [out, r].
struct AdapterPair {
  torch::Tensor a, b;
};

// `adapters` by layer path (either half may be missing); std::invalid_argument naming one that is
// not an adapter's parameter.
std::map<std::string, AdapterPair> paired(
    const std::vector<std::pair<std::string, torch::Tensor>>& adapters) {
  std::map<std::string, AdapterPair> pairs;
  for (const auto& [name, tensor] : adapters) {
    const std::string layer = name.substr(0, name.rfind('.'));
    if (ends_with(name, kA)) {
      pairs[layer].a = tensor;
    } else if (ends_with(name, kB)) {
      pairs[layer].b = tensor;
    } else {
      throw std::invalid_argument("'" + name + "' is not an adapter's parameter");
    }
  }
  return pairs;
}

// Whether B A has the weight's shape [out, in]: A [r, in], B [out, r].
bool fits(const AdapterPair& pair, const torch::Tensor& weight) {
  return pair.a.dim() == 2 && pair.b.dim() == 2 && weight.dim() == 2 &&
         pair.b.size(1) == pair.a.size(0) && pair.b.size(0) == weight.size(0) &&
         pair.a.size(1) == weight.size(1);
}

}  // namespace

std::vector<std::string> lora_targets(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream names(text);
  std::string name;
  while (std::getline(names, name, ',')) {
    if (!name.empty()) out.push_back(name);
  }
  return out;
}

std::vector<std::string> add_adapters(Transformer& model, const std::vector<std::string>& targets,
                                      const AdapterOptions& options) {
  for (auto& p : model->parameters()) p.requires_grad_(false);
  std::vector<bool> used(targets.size(), false);
  std::vector<std::string> adapted;
  for (const auto& item : model->named_modules("", /*include_self=*/false)) {
    if (auto* attention = item.value()->as<MultiheadAttentionImpl>()) {
      adapt_layer(*attention, item.key(), targets, options, used, adapted);
    } else if (auto* ffn = item.value()->as<FeedForwardImpl>()) {
      adapt_layer(*ffn, item.key(), targets, options, used, adapted);
    }
  }
  for (size_t t = 0; t < targets.size(); ++t) {
    if (!used[t]) {
      throw std::invalid_argument(
          "lora.targets: '" + targets[t] +
          "' names no layer of the model that takes an adapter (the attention projections "
          "q_proj, k_proj, v_proj, out_proj of self_attn and cross_attn, the feed-forward fc1 "
          "and fc2 of ffn, e.g. decoder.layers.0.cross_attn.q_proj)");
    }
  }
  return adapted;
}

bool is_adapter_parameter(const std::string& name) {
  return ends_with(name, kA) || ends_with(name, kB);
}

void merge_adapters(Transformer& model,
                    const std::vector<std::pair<std::string, torch::Tensor>>& adapters,
                    double scale) {
  const std::map<std::string, AdapterPair> pairs = paired(adapters);
  auto params = model->named_parameters(/*recurse=*/true);
  torch::NoGradGuard no_grad;
  // Every pair is checked before any weight changes (peft's safe_merge): a bad set leaves the
  // model as it was. Then each weight in turn, so that no more than one merge is held at a time.
  std::vector<std::pair<torch::Tensor, const AdapterPair*>> planned;  // (weight, its adapter)
  for (const auto& [path, pair] : pairs) {
    if (!pair.a.defined()) continue;  // said below, after the others
    if (!pair.b.defined()) throw std::invalid_argument("adapter '" + path + "' has no lora_b");
    const auto* weight = params.find(path + ".weight");
    if (weight == nullptr) {
      throw std::invalid_argument("adapter '" + path + "' sits beside no layer of the model");
    }
    if (!fits(pair, *weight)) {
      throw std::invalid_argument("adapter '" + path + "' does not fit its layer's weight");
    }
    planned.emplace_back(*weight, &pair);
  }
  for (const auto& [path, pair] : pairs) {
    if (!pair.a.defined()) throw std::invalid_argument("adapter '" + path + "' has no lora_a");
  }
  for (auto& [weight, pair] : planned) {
    const auto delta = torch::mm(pair->b.to(torch::kFloat32), pair->a.to(torch::kFloat32)) * scale;
    weight.copy_(weight.to(torch::kFloat32) + delta);
  }
}

}  // namespace tandem::model
