#include "trainer/import/hf_folder.h"

#include <sys/stat.h>
#include <torch/serialize.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "trainer/common/atomic_file.h"
#include "trainer/import/safetensors.h"

namespace tandem::importer {
namespace {

using nlohmann::json;

// Rows of a tensor read at once when its rows are taken in another order or compared: a block of
// at most this many bytes, as stored.
constexpr int64_t kBlockBytes = 64 << 20;

// A state dict saved by torch.save (pytorch_model.bin): a zip of pickled tensors, read whole,
// straight into the bytes torch::pickle_load takes (a multi-GB file is not held twice).
StoredTensors read_pickled(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::invalid_argument("cannot read '" + file + "'");
  const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                std::istreambuf_iterator<char>()};
  if (!in.good() && !in.eof()) throw std::invalid_argument("cannot read '" + file + "'");
  StoredTensors tensors;
  try {
    const c10::IValue value = torch::pickle_load(bytes);
    if (!value.isGenericDict()) throw std::invalid_argument("not a dictionary of tensors");
    for (const auto& entry : value.toGenericDict()) {
      if (!entry.key().isString() || !entry.value().isTensor()) {
        throw std::invalid_argument("an entry that is not a named tensor");
      }
      tensors.emplace(entry.key().toStringRef(), StoredTensor(entry.value().toTensor()));
    }
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + file + "': not a state dict saved by torch.save (" +
                                std::string(e.what()).substr(0, 200) + ")");
  }
  return tensors;
}

// A safetensors file's tensors to be read when asked; a pickle's, read now.
StoredTensors read_one(const std::string& file, bool safetensors) {
  if (!safetensors) return read_pickled(file);
  const auto opened = std::make_shared<const SafetensorsFile>(file);
  StoredTensors tensors;
  for (const auto& [name, entry] : opened->entries())
    tensors.emplace(name, StoredTensor(opened, name));
  return tensors;
}

// The shards an index lists, read one by one into one map; each shard must hold exactly the
// tensors the index gives it.
StoredTensors read_sharded(const std::string& dir, const std::string& index_file,
                           bool safetensors) {
  const json index = read_json(index_file);
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object() || map->empty()) {
    throw std::invalid_argument(index_file +
                                ": weight_map is missing or not an object of "
                                "tensor -> shard file");
  }
  std::map<std::string, std::set<std::string>> shards;  // shard file -> its tensors
  for (const auto& [name, shard] : map->items()) {
    const std::string file = shard.is_string() ? shard.get<std::string>() : "";
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      throw std::invalid_argument(index_file + ": weight_map[\"" + name + "\"] = " + shard.dump() +
                                  ": expected a file name in the folder");
    }
    shards[file].insert(name);
  }
  StoredTensors tensors;
  for (const auto& [file, names] : shards) {
    const std::string path = dir + "/" + file;
    if (!is_file(path)) {
      throw std::invalid_argument(index_file + ": shard '" + file + "' (holding '" +
                                  *names.begin() + "') is not in " + dir);
    }
    for (auto& [name, tensor] : read_one(path, safetensors)) {
      if (!names.count(name)) {
        throw std::invalid_argument(path + ": tensor '" + name + "' is not listed for this " +
                                    "shard by " + index_file);
      }
      tensors.emplace(name, std::move(tensor));
    }
    for (const std::string& name : names) {
      if (!tensors.count(name)) {
        throw std::invalid_argument(index_file + ": tensor '" + name + "' is listed in shard '" +
                                    file + "', which does not hold it");
      }
    }
  }
  return tensors;
}

// Row blocks of a [rows, ...] tensor as stored, each of about kBlockBytes.
int64_t rows_per_block(const std::vector<int64_t>& shape, int64_t element_size) {
  int64_t row_bytes = element_size;
  for (size_t i = 1; i < shape.size(); ++i) row_bytes *= shape[i];
  return std::max<int64_t>(1, kBlockBytes / std::max<int64_t>(1, row_bytes));
}

}  // namespace

StoredTensor::StoredTensor(torch::Tensor held)
    : held_(std::move(held)), shape_(held_.sizes().vec()) {}

StoredTensor::StoredTensor(std::shared_ptr<const SafetensorsFile> file, std::string name)
    : file_(std::move(file)), name_(std::move(name)), shape_(file_->entries().at(name_).shape) {}

torch::Tensor StoredTensor::read() const { return file_ ? file_->read(name_) : held_; }

torch::Tensor StoredTensor::read_rows(int64_t begin, int64_t count) const {
  return file_ ? file_->read_rows(name_, begin, count) : held_.narrow(0, begin, count);
}

Pending Pending::held(torch::Tensor tensor) {
  auto shape = tensor.sizes().vec();
  return Pending{std::move(shape), [tensor] { return tensor; }};
}

bool is_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

bool is_dir(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::string read_input_file(const std::string& path) {
  try {
    return read_file(path);
  } catch (const std::runtime_error& e) {  // a file of the user's folder: bad input
    throw std::invalid_argument(e.what());
  }
}

json read_json(const std::string& path) {
  try {
    return json::parse(read_input_file(path));
  } catch (const json::exception& e) {
    throw std::invalid_argument("'" + path + "' is not JSON: " + e.what());
  }
}

Keys::Keys(json j, std::string file) : j_(std::move(j)), file_(std::move(file)) {
  if (!j_.is_object()) throw std::invalid_argument(file_ + ": expected a JSON object");
}

void Keys::refuse(const std::string& key, const std::string& why) const {
  const auto it = j_.find(key);
  throw std::invalid_argument(file_ + ": " + key +
                              (it == j_.end() ? std::string(" is missing") : " = " + it->dump()) +
                              ": " + why);
}

bool Keys::has(const std::string& key) const {
  const auto it = j_.find(key);
  return it != j_.end() && !it->is_null();
}

int64_t Keys::integer(const std::string& key) const {
  const auto it = j_.find(key);
  if (it == j_.end() || !it->is_number_integer()) refuse(key, "expected an integer");
  return it->get<int64_t>();
}

int64_t Keys::integer_or(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double Keys::number_or(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& value = j_.at(key);
  if (!value.is_number()) refuse(key, "expected a number");
  return value.get<double>();
}

bool Keys::boolean_or(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& value = j_.at(key);
  if (!value.is_boolean()) refuse(key, "expected true or false");
  return value.get<bool>();
}

std::string Keys::text(const std::string& key) const {
  const auto it = j_.find(key);
  if (it == j_.end() || !it->is_string()) refuse(key, "expected a string");
  return it->get<std::string>();
}

std::string Keys::text_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? text(key) : fallback;
}

StoredTensors read_weights(const std::string& dir, std::string* file) {
  for (const bool safetensors : {true, false}) {
    const std::string whole = dir + (safetensors ? "/model.safetensors" : "/pytorch_model.bin");
    *file = whole;
    if (is_file(whole)) return read_one(whole, safetensors);
    *file = whole + ".index.json";
    if (is_file(*file)) return read_sharded(dir, *file, safetensors);
  }
  throw std::invalid_argument("'" + dir +
                              "' holds none of model.safetensors, pytorch_model.bin and their "
                              "sharded forms (*.index.json)");
}

Weights::Weights(StoredTensors tensors, std::string file)
    : tensors_(std::move(tensors)), file_(std::move(file)) {
  // A ...ForConditionalGeneration saves model.encoder..., the bare model encoder...
  prefix_ = tensors_.count("model.shared.weight") || has_prefix("model.encoder.") ? "model." : "";
}

bool Weights::has(const std::string& name) const { return tensors_.count(full(name)) > 0; }

const StoredTensor& Weights::stored(const std::string& name, const std::vector<int64_t>& shape) {
  const auto it = tensors_.find(full(name));
  if (it == tensors_.end()) throw std::invalid_argument(file_ + ": no tensor '" + full(name) + "'");
  if (it->second.shape() != shape) {
    std::ostringstream message;
    message << file_ << ": tensor '" << it->first << "' has shape "
            << c10::IntArrayRef(it->second.shape()) << ", expected " << c10::IntArrayRef(shape);
    throw std::invalid_argument(message.str());
  }
  taken_.insert(it->first);
  return it->second;
}

Pending Weights::take(const std::string& name, const std::vector<int64_t>& shape) {
  const StoredTensor tensor = stored(name, shape);  // a handle: the pending read outlives `this`
  return Pending{shape, [tensor] { return tensor.read().to(torch::kFloat32).contiguous(); }};
}

// The rows in runs of consecutive ones (an id table is mostly one run), each run read a block at a
// time, converted as it is copied into its place.
Pending Weights::take_rows(const std::string& name, const std::vector<int64_t>& shape,
                           std::vector<int64_t> rows) {
  const StoredTensor tensor = stored(name, shape);  // a handle: the pending read outlives `this`
  for (const int64_t row : rows) {
    if (row < 0 || row >= shape.at(0)) {
      throw std::logic_error("import: row " + std::to_string(row) + " of '" + full(name) + "'");
    }
  }
  std::vector<int64_t> out_shape = shape;
  out_shape[0] = static_cast<int64_t>(rows.size());
  return Pending{out_shape, [tensor, out_shape, rows = std::move(rows)] {
                   auto out = torch::empty(out_shape, torch::kFloat32);
                   const int64_t block = rows_per_block(out_shape, sizeof(float));
                   const auto n = static_cast<int64_t>(rows.size());
                   for (int64_t i = 0; i < n;) {
                     int64_t run = 1;
                     while (i + run < n && run < block && rows[i + run] == rows[i] + run) ++run;
                     out.narrow(0, i, run).copy_(tensor.read_rows(rows[i], run));
                     i += run;
                   }
                   return out;
                 }};
}

void Weights::check_same(const std::string& name, const torch::Tensor& expected, double tolerance,
                         const std::string& why) {
  if (!has(name)) return;
  const auto t = take(name, expected.sizes().vec()).make();
  if (!(t.sub(expected).abs().max().item<double>() <= tolerance)) {
    throw std::invalid_argument(file_ + ": tensor '" + full(name) + "' differs from " + why);
  }
}

void Weights::check_copy(const std::string& copy, const std::string& name, const std::string& why) {
  if (!has(copy)) return;
  const StoredTensor& original = tensors_.at(full(name));
  const StoredTensor& other = stored(copy, original.shape());
  const int64_t rows = original.shape().empty() ? 0 : original.shape()[0];
  const int64_t block = rows_per_block(original.shape(), sizeof(float));
  for (int64_t begin = 0; begin < rows; begin += block) {
    const int64_t count = std::min(block, rows - begin);
    if (!torch::equal(other.read_rows(begin, count).to(torch::kFloat32),
                      original.read_rows(begin, count).to(torch::kFloat32))) {
      throw std::invalid_argument(file_ + ": tensor '" + full(copy) + "' differs from " + why);
    }
  }
}

void Weights::check_all_taken() const {
  for (const auto& [name, tensor] : tensors_) {
    if (!taken_.count(name)) {
      throw std::invalid_argument(file_ + ": tensor '" + name +
                                  "' has no place in Tandem's model (a part this import "
                                  "does not know)");
    }
  }
}

std::string Weights::full(const std::string& name) const {
  return name == "final_logits_bias" || name == "lm_head.weight" ? name : prefix_ + name;
}

namespace {

// One layer's tensors under Tandem's names: `layer` names it in both ("decoder.layers.2.").
void take_layer(Weights& weights, const std::string& layer, bool decoder,
                const config::ModelConfig& m, PendingTensors* out) {
  const int64_t d = m.d_model;
  auto linear = [&](const std::string& from, const std::string& to, int64_t rows, int64_t cols) {
    (*out)[layer + to + ".weight"] = weights.take(layer + from + ".weight", {rows, cols});
    (*out)[layer + to + ".bias"] = weights.take(layer + from + ".bias", {rows});
  };
  auto norm = [&](const std::string& from, const std::string& to) {
    (*out)[layer + to + ".weight"] = weights.take(layer + from + ".weight", {d});
    (*out)[layer + to + ".bias"] = weights.take(layer + from + ".bias", {d});
  };
  auto attention = [&](const std::string& from, const std::string& to) {
    for (const char* proj : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      linear(from + "." + proj, to + "." + proj, d, d);
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

}  // namespace

config::ModelConfig bart_shape(const Keys& keys) {
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
  for (const char* key : {"d_model", "encoder_layers", "decoder_layers", "encoder_ffn_dim"}) {
    if (keys.integer(key) <= 0) keys.refuse(key, "expected a positive number");
  }
  if (m.heads <= 0 || m.d_model % m.heads != 0) {
    keys.refuse("encoder_attention_heads", "must divide d_model");
  }
  m.dropout = keys.number_or("dropout", 0.1);
  m.max_positions = keys.integer_or("max_position_embeddings", 1024);
  if (m.max_positions < 2) keys.refuse("max_position_embeddings", "expected at least 2");
  return m;
}

std::string dropped_settings(const Keys& keys, std::initializer_list<const char*> names,
                             double dropout) {
  std::ostringstream out;
  for (const char* name : names) {
    const double value = keys.number_or(name, 0.0);
    if (value != 0.0) {
      out << " (" << name << " " << value << " is not Tandem's: it trains with dropout " << dropout
          << " alone)";
    }
  }
  return out.str();
}

Pending take_shared_embeddings(Weights& weights, int64_t vocab, int64_t d,
                               std::vector<int64_t> rows) {
  const std::string name = weights.has("shared.weight") ? "shared.weight"
                           : weights.has("encoder.embed_tokens.weight")
                               ? "encoder.embed_tokens.weight"
                               : "decoder.embed_tokens.weight";
  Pending shared = weights.take_rows(name, {vocab, d}, std::move(rows));
  for (const char* copy :
       {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight", "lm_head.weight"}) {
    if (copy != name) {
      weights.check_copy(copy, name, "the shared embeddings (untied ones are not imported)");
    }
  }
  return shared;
}

void take_bart_layers(Weights& weights, const config::ModelConfig& m, PendingTensors* out) {
  for (int64_t i = 0; i < m.encoder_layers; ++i) {
    take_layer(weights, "encoder.layers." + std::to_string(i) + ".", false, m, out);
  }
  for (int64_t i = 0; i < m.decoder_layers; ++i) {
    take_layer(weights, "decoder.layers." + std::to_string(i) + ".", true, m, out);
  }
}

bool Weights::has_prefix(const std::string& prefix) const {
  const auto it = tensors_.lower_bound(prefix);
  return it != tensors_.end() && it->first.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace tandem::importer
