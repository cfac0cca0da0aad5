#include "trainer/import/marian.h"

#include <sys/stat.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "data/vocab.h"
#include "trainer/checkpoint/model_io.h"
#include "trainer/common/token_ids.h"
#include "trainer/config/config.h"
#include "trainer/import/safetensors.h"
#include "trainer/model/transformer.h"

namespace tandem::importer {
namespace {

using nlohmann::json;
using TensorMap = std::map<std::string, torch::Tensor>;

// Output bias of Tandem's own pad row: its softmax share is exactly 0 in float32.
constexpr float kNeverBias = -1e9f;

bool is_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read '" + path + "'");
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

json read_json(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    throw std::invalid_argument("'" + path + "' is not JSON: " + e.what());
  }
}

// config.json's keys, each error naming the file, the key and the value.
class Keys {
 public:
  Keys(json j, std::string file) : j_(std::move(j)), file_(std::move(file)) {
    if (!j_.is_object()) throw std::invalid_argument(file_ + ": expected a JSON object");
  }

  [[noreturn]] void refuse(const std::string& key, const std::string& why) const {
    const auto it = j_.find(key);
    throw std::invalid_argument(file_ + ": " + key +
                                (it == j_.end() ? std::string(" is missing") : " = " + it->dump()) +
                                ": " + why);
  }

  int64_t integer(const std::string& key) const {
    const auto it = j_.find(key);
    if (it == j_.end() || !it->is_number_integer()) refuse(key, "expected an integer");
    return it->get<int64_t>();
  }
  int64_t integer_or(const std::string& key, int64_t fallback) const {
    return j_.contains(key) && !j_.at(key).is_null() ? integer(key) : fallback;
  }
  double number_or(const std::string& key, double fallback) const {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_number()) refuse(key, "expected a number");
    return it->get<double>();
  }
  bool boolean_or(const std::string& key, bool fallback) const {
    const auto it = j_.find(key);
    if (it == j_.end() || it->is_null()) return fallback;
    if (!it->is_boolean()) refuse(key, "expected true or false");
    return it->get<bool>();
  }
  std::string text(const std::string& key) const {
    const auto it = j_.find(key);
    if (it == j_.end() || !it->is_string()) refuse(key, "expected a string");
    return it->get<std::string>();
  }

 private:
  json j_;
  std::string file_;
};

// The id layout of the Marian model: its special ids, as config.json and vocab.json give them.
struct MarianIds {
  int64_t pad, eos, unk;
};

// Marian's switches for variants that compute another function than Tandem's post-norm model:
// each refused at the value that turns the variant on (absent keys take MarianMT's defaults).
void refuse_other_variants(const Keys& keys) {
  static const struct {
    const char* key;
    bool absent;   // the value when config.json omits the key
    bool refused;  // the value that is not imported
    const char* why;
  } kVariants[] = {
      {"scale_embedding", false, false,
       "Tandem scales embeddings by sqrt(d_model), as OPUS-MT does"},
      {"normalize_before", false, true, "pre-norm MarianMT layers are not imported"},
      {"add_final_layer_norm", false, true, "Tandem's post-norm stacks end without a LayerNorm"},
      {"normalize_embedding", false, true, "Tandem has no LayerNorm on the embeddings"},
      {"static_position_embeddings", true, false, "Tandem's positions are the sinusoid table"},
      {"share_encoder_decoder_embeddings", true, false,
       "separate decoder embeddings and vocabularies are not imported"},
      {"tie_word_embeddings", true, false,
       "an output layer apart from the embeddings is not imported"},
  };
  for (const auto& v : kVariants) {
    if (keys.boolean_or(v.key, v.absent) == v.refused) keys.refuse(v.key, v.why);
  }
}

// The vocabulary's size and special ids, as config.json gives them (<unk> comes from vocab.json).
MarianIds marian_ids(const Keys& keys, int64_t* vocab_size) {
  *vocab_size = keys.integer("vocab_size");
  if (*vocab_size < 3) keys.refuse("vocab_size", "expected at least </s>, <unk> and <pad>");
  if (keys.integer_or("decoder_vocab_size", *vocab_size) != *vocab_size) {
    keys.refuse("decoder_vocab_size",
                "a decoder vocabulary apart from the source's is not imported");
  }
  MarianIds ids{keys.integer("pad_token_id"), keys.integer("eos_token_id"), -1};
  if (keys.integer_or("decoder_start_token_id", ids.pad) != ids.pad) {
    keys.refuse("decoder_start_token_id", "expected pad_token_id, as every MarianMT model has");
  }
  for (const char* key : {"pad_token_id", "eos_token_id"}) {
    const int64_t id = keys.integer(key);
    if (id < 0 || id >= *vocab_size) keys.refuse(key, "outside the vocabulary");
  }
  if (ids.pad == ids.eos) keys.refuse("eos_token_id", "the same id as pad_token_id");
  return ids;
}

// What config.json says of the layers, as Tandem's model config; refuses what Tandem would
// compute otherwise.
config::ModelConfig model_config(const Keys& keys, std::string* notes) {
  const std::string type = keys.text("model_type");
  if (type != "marian") keys.refuse("model_type", "not a MarianMT model (expected \"marian\")");
  config::ModelConfig m;
  m.d_model = keys.integer("d_model");
  m.encoder_layers = keys.integer("encoder_layers");
  m.decoder_layers = keys.integer("decoder_layers");
  m.heads = keys.integer("encoder_attention_heads");
  if (keys.integer("decoder_attention_heads") != m.heads) {
    keys.refuse("decoder_attention_heads", "Tandem's encoder and decoder have one head count");
  }
  m.d_ff = keys.integer("encoder_ffn_dim");
  if (keys.integer("decoder_ffn_dim") != m.d_ff) {
    keys.refuse("decoder_ffn_dim", "Tandem's encoder and decoder have one feed-forward width");
  }
  if (m.d_model <= 0 || m.heads <= 0 || m.d_model % m.heads != 0) {
    keys.refuse("encoder_attention_heads", "must divide d_model");
  }
  m.dropout = keys.number_or("dropout", 0.1);
  m.max_positions = keys.integer_or("max_position_embeddings", 1024);
  m.pre_norm = false;
  m.tie_embeddings = true;
  m.positions = config::PositionLayout::kHalves;
  const std::string activation = keys.text("activation_function");
  if (activation == "swish" || activation == "silu") {
    m.activation = config::Activation::kSwish;
  } else if (activation == "relu") {
    m.activation = config::Activation::kRelu;
  } else {
    keys.refuse("activation_function", "Tandem's feed-forward is swish (silu) or relu");
  }
  refuse_other_variants(keys);
  for (const char* key : {"attention_dropout", "activation_dropout"}) {
    if (keys.number_or(key, 0.0) != 0.0) {
      *notes += std::string(" (") + key + " is not Tandem's: it trains with dropout " +
                std::to_string(m.dropout) + " alone)";
    }
  }
  return m;
}

// vocab.json: every id of [0, vocab_size) once. pieces[id] is Marian's piece text.
std::vector<std::string> marian_pieces(const std::string& path, int64_t vocab_size) {
  const json vocab = read_json(path);
  if (!vocab.is_object()) throw std::invalid_argument(path + ": expected an object piece -> id");
  if (static_cast<int64_t>(vocab.size()) != vocab_size) {
    throw std::invalid_argument(path + ": " + std::to_string(vocab.size()) +
                                " pieces, but config.json's vocab_size is " +
                                std::to_string(vocab_size));
  }
  std::vector<std::string> pieces(vocab_size);
  std::vector<bool> seen(vocab_size, false);
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size) {
      throw std::invalid_argument(path + ": piece '" + piece + "' has id " + id.dump() +
                                  ", outside [0, " + std::to_string(vocab_size) + ")");
    }
    const auto at = id.get<int64_t>();
    if (seen[at]) throw std::invalid_argument(path + ": id " + std::to_string(at) + " twice");
    seen[at] = true;
    pieces[at] = piece;
  }
  return pieces;
}

// The weights file's tensors by name: model.safetensors, else pytorch_model.bin (torch.save).
TensorMap read_weights(const std::string& dir, std::string* file) {
  *file = dir + "/model.safetensors";
  if (is_file(*file)) return read_safetensors(*file);
  *file = dir + "/pytorch_model.bin";
  if (!is_file(*file)) {
    throw std::invalid_argument("'" + dir +
                                "' holds neither model.safetensors nor pytorch_model.bin");
  }
  std::ifstream in(*file, std::ios::binary);
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) throw std::invalid_argument("cannot read '" + *file + "'");
  TensorMap tensors;
  try {
    const c10::IValue value = torch::pickle_load(bytes);
    if (!value.isGenericDict()) throw std::invalid_argument("not a dictionary of tensors");
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        throw std::invalid_argument("an entry that is not a named tensor");
      }
      tensors.emplace(entry.key().toStringRef(), entry.value().toTensor());
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + *file + "': not a state dict saved by torch.save (" +
                                std::string(e.what()).substr(0, 200) + ")");
  }
  return tensors;
}

// Takes tensors out of the file's by name, as float32, and says which were never taken.
class Weights {
 public:
  Weights(TensorMap tensors, std::string file)
      : tensors_(std::move(tensors)), file_(std::move(file)) {
    // MarianMTModel saves model.encoder..., MarianModel encoder...
    prefix_ = tensors_.count("model.shared.weight") || has_prefix("model.encoder.") ? "model." : "";
  }

  bool has(const std::string& name) const { return tensors_.count(full(name)) > 0; }

  torch::Tensor take(const std::string& name, const std::vector<int64_t>& shape) {
    const auto it = tensors_.find(full(name));
    if (it == tensors_.end()) {
      throw std::invalid_argument(file_ + ": no tensor '" + full(name) + "'");
    }
    if (it->second.sizes() != c10::IntArrayRef(shape)) {
      std::ostringstream message;
      message << file_ << ": tensor '" << it->first << "' has shape " << it->second.sizes()
              << ", expected " << c10::IntArrayRef(shape);
      throw std::invalid_argument(message.str());
    }
    taken_.insert(it->first);
    return it->second.to(torch::kFloat32).contiguous();
  }

  // A tensor that must equal `expected` where the file has it (tied copies, the position table).
  void check_same(const std::string& name, const torch::Tensor& expected, double tolerance,
                  const std::string& why) {
    if (!has(name)) return;
    const auto t = take(name, expected.sizes().vec());
    if (!(t.sub(expected).abs().max().item<double>() <= tolerance)) {
      throw std::invalid_argument(file_ + ": tensor '" + full(name) + "' differs from " + why);
    }
  }

  // Every tensor was given a place.
  void check_all_taken() const {
    for (const auto& [name, tensor] : tensors_) {
      if (!taken_.count(name)) {
        throw std::invalid_argument(file_ + ": tensor '" + name +
                                    "' has no place in Tandem's model (a part this import "
                                    "does not know)");
      }
    }
  }

 private:
  std::string full(const std::string& name) const {
    return name == "final_logits_bias" || name == "lm_head.weight" ? name : prefix_ + name;
  }
  bool has_prefix(const std::string& prefix) const {
    const auto it = tensors_.lower_bound(prefix);
    return it != tensors_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
  }

  TensorMap tensors_;
  std::string file_, prefix_;
  std::set<std::string> taken_;
};

// One layer's tensors under Tandem's names: `from` is the Marian layer, `to` Tandem's.
void map_layer(Weights& weights, const std::string& from, const std::string& to, bool decoder,
               const config::ModelConfig& m, std::map<std::string, torch::Tensor>* out) {
  const int64_t d = m.d_model;
  auto linear = [&](const std::string& marian, const std::string& tandem, int64_t rows,
                    int64_t cols) {
    (*out)[to + tandem + ".weight"] = weights.take(from + marian + ".weight", {rows, cols});
    (*out)[to + tandem + ".bias"] = weights.take(from + marian + ".bias", {rows});
  };
  auto norm = [&](const std::string& marian, const std::string& tandem) {
    (*out)[to + tandem + ".weight"] = weights.take(from + marian + ".weight", {d});
    (*out)[to + tandem + ".bias"] = weights.take(from + marian + ".bias", {d});
  };
  auto attention = [&](const std::string& marian, const std::string& tandem) {
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      linear(marian + "." + proj, tandem + "." + proj, d, d);
    }
  };
  attention("self_attn", "self_attn");
  norm("self_attn_layer_norm", "self_attn_norm");
  if (decoder) {
    attention("encoder_attn", "cross_attn");
    norm("encoder_attn_layer_norm", "cross_attn_norm");
  }
  linear("fc1", "ffn.fc1", m.d_ff, d);
  linear("fc2", "ffn.fc2", d, m.d_ff);
  norm("final_layer_norm", "ffn_norm");
}

std::string describe(const config::ModelConfig& m, int64_t marian_vocab, int64_t tandem_vocab) {
  std::ostringstream out;
  out << "marian: " << m.encoder_layers << "+" << m.decoder_layers << " layers, d_model "
      << m.d_model << ", " << m.heads << " heads, d_ff " << m.d_ff << ", "
      << (m.activation == config::Activation::kSwish ? "swish" : "relu") << ", dropout "
      << m.dropout << ", " << marian_vocab << " pieces (" << tandem_vocab << " ids in Tandem)";
  return out.str();
}

// Tandem's id table (<pad> <unk> <s> </s>, then Marian's other pieces in Marian's order) and the
// Marian row each Tandem id takes.
struct IdTable {
  std::vector<std::string> pieces;
  std::vector<int64_t> marian_row;
};

IdTable id_table(const std::vector<std::string>& marian, const MarianIds& ids) {
  IdTable t{{"<pad>", "<unk>", "<s>", "</s>"}, {ids.pad, ids.unk, ids.pad, ids.eos}};
  for (int64_t id = 0; id < static_cast<int64_t>(marian.size()); ++id) {
    if (id == ids.pad || id == ids.unk || id == ids.eos) continue;
    t.pieces.push_back(marian[id]);
    t.marian_row.push_back(id);
  }
  return t;
}

// Every tensor under Tandem's name, rows in Tandem's id order.
std::map<std::string, torch::Tensor> tandem_tensors(Weights& weights, const config::ModelConfig& m,
                                                    int64_t marian_vocab, const IdTable& table) {
  const int64_t d = m.d_model;
  const std::string shared_name = weights.has("shared.weight") ? "shared.weight"
                                  : weights.has("encoder.embed_tokens.weight")
                                      ? "encoder.embed_tokens.weight"
                                      : "decoder.embed_tokens.weight";
  const torch::Tensor shared = weights.take(shared_name, {marian_vocab, d});
  for (const char* copy :
       {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"}) {
    weights.check_same(copy, shared, 0.0, "the shared embeddings (untied ones are not imported)");
  }
  const auto rows = torch::tensor(table.marian_row, torch::kLong);
  std::map<std::string, torch::Tensor> named;
  named["src_embed.weight"] = shared.index_select(0, rows);
  torch::Tensor bias = weights.has("final_logits_bias")
                           ? weights.take("final_logits_bias", {1, marian_vocab})[0]
                           : torch::zeros({marian_vocab});
  bias = bias.index_select(0, rows).contiguous();
  bias[kPadId] = kNeverBias;
  named["output_proj.bias"] = bias;
  // MarianMT computes its sinusoid table at load; a file that holds one holds that table.
  const auto positions =
      model::sinusoidal_positions(m.max_positions, d, model::PositionLayout::kHalves);
  for (const char* stack : {"encoder", "decoder"}) {
    weights.check_same(std::string(stack) + ".embed_positions.weight", positions, 1e-3,
                       "the sinusoid table (sin in the first half of the columns, cos in the "
                       "second) that MarianMT computes");
  }
  for (int64_t i = 0; i < m.encoder_layers; ++i) {
    const std::string layer = "encoder.layers." + std::to_string(i) + ".";
    map_layer(weights, layer, layer, false, m, &named);
  }
  for (int64_t i = 0; i < m.decoder_layers; ++i) {
    const std::string layer = "decoder.layers." + std::to_string(i) + ".";
    map_layer(weights, layer, layer, true, m, &named);
  }
  weights.check_all_taken();
  return named;
}

void require_files(const std::string& dir) {
  if (!is_dir(dir)) throw std::invalid_argument("'" + dir + "' is not a folder");
  if (!is_file(dir + "/config.json")) {
    throw std::invalid_argument("'" + dir + "' has no config.json: not a MarianMT model folder");
  }
  for (const char* name : {"source.spm", "target.spm", "vocab.json"}) {
    if (!is_file(dir + "/" + name)) {
      throw std::invalid_argument("'" + dir + "' has no " + name +
                                  " (a MarianMT folder holds source.spm, target.spm and "
                                  "vocab.json beside config.json)");
    }
  }
}

}  // namespace

ImportedModel import_marian(const std::string& dir) {
  require_files(dir);
  const std::string config_path = dir + "/config.json";
  const Keys keys(read_json(config_path), config_path);
  std::string notes;
  config::Config config;
  config.model = model_config(keys, &notes);
  int64_t marian_vocab = 0;
  MarianIds ids = marian_ids(keys, &marian_vocab);
  const std::vector<std::string> pieces = marian_pieces(dir + "/vocab.json", marian_vocab);
  const auto unk = std::find(pieces.begin(), pieces.end(), "<unk>");
  if (unk == pieces.end()) throw std::invalid_argument(dir + "/vocab.json: no piece <unk>");
  ids.unk = unk - pieces.begin();
  if (ids.unk == ids.pad || ids.unk == ids.eos) {
    throw std::invalid_argument(dir + "/vocab.json: <unk> has the id of pad or eos");
  }
  const IdTable table = id_table(pieces, ids);
  const auto vocab_size = static_cast<int64_t>(table.pieces.size());
  const data::Vocab vocab = data::Vocab::from_pair(read_file(dir + "/source.spm"),
                                                   read_file(dir + "/target.spm"), table.pieces);

  std::string weights_file;
  Weights weights(read_weights(dir, &weights_file), weights_file);
  const auto named = tandem_tensors(weights, config.model, marian_vocab, table);
  // In the order and under the names of Tandem's model of these options.
  model::Transformer model(checkpoint::model_options(config.model, vocab_size));
  ImportedModel out;
  for (const auto& [name, param] : checkpoint::named_parameters(model)) {
    const auto it = named.find(name);
    if (it == named.end()) {
      throw std::logic_error("import_marian: no tensor for Tandem's parameter " + name);
    }
    out.checkpoint.model.emplace_back(name, it->second);
  }
  checkpoint::check_compatible(dir, out.checkpoint.model, checkpoint::named_parameters(model));
  config.data.corpus = "(none: imported from " + dir + "; set data.corpus)";
  out.checkpoint.config_yaml = config::to_yaml(config);
  out.checkpoint.vocab = vocab.bytes();
  out.summary = describe(config.model, marian_vocab, vocab_size) + notes;
  return out;
}

}  // namespace tandem::importer
