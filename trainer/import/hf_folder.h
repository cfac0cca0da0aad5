// What every Hugging Face model folder tandem-import reads is made of: config.json's keys, JSON
// files, and the weights (model.safetensors or pytorch_model.bin, whole or in shards listed by
// their *.index.json) taken one by one under the model's names.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/import/safetensors.h"

namespace tandem::importer {

// One tensor of a folder's weights, read when asked: from its safetensors file, whole or some rows
// at a time, or held in memory (pytorch_model.bin is a pickle, which is read whole).
class StoredTensor {
 public:
  explicit StoredTensor(torch::Tensor held);
  StoredTensor(std::shared_ptr<const SafetensorsFile> file, std::string name);

  const std::vector<int64_t>& shape() const { return shape_; }
  torch::Tensor read() const;  // as stored
  // Rows [begin, begin + count) of the first dimension, as stored.
  torch::Tensor read_rows(int64_t begin, int64_t count) const;

 private:
  torch::Tensor held_;
  std::shared_ptr<const SafetensorsFile> file_;
  std::string name_;
  std::vector<int64_t> shape_;
};

using StoredTensors = std::map<std::string, StoredTensor>;

// A tensor of the checkpoint an import writes, float32, made (read, converted, its rows put in
// Tandem's order) only when the checkpoint's writer asks for it: an import holds about one tensor
// at a time, not the model.
struct Pending {
  std::vector<int64_t> shape;
  std::function<torch::Tensor()> make;

  static Pending held(torch::Tensor tensor);  // a tensor the import computed
};

using PendingTensors = std::map<std::string, Pending>;

bool is_file(const std::string& path);
bool is_dir(const std::string& path);
// The whole of a file the user gave (common/atomic_file.h read_file); std::invalid_argument
// naming it and the OS error when it cannot be read.
std::string read_input_file(const std::string& path);
// The file as JSON; std::invalid_argument naming it when it is not.
nlohmann::json read_json(const std::string& path);

// A JSON object's keys (config.json's), each error one line naming the file, the key and the
// value (std::invalid_argument).
class Keys {
 public:
  Keys(nlohmann::json j, std::string file);

  [[noreturn]] void refuse(const std::string& key, const std::string& why) const;
  bool has(const std::string& key) const;  // present and not null
  int64_t integer(const std::string& key) const;
  int64_t integer_or(const std::string& key, int64_t fallback) const;
  double number_or(const std::string& key, double fallback) const;
  bool boolean_or(const std::string& key, bool fallback) const;
  std::string text(const std::string& key) const;
  std::string text_or(const std::string& key, const std::string& fallback) const;
  const std::string& file() const { return file_; }

 private:
  nlohmann::json j_;
  std::string file_;
};

// The folder's weights by name: model.safetensors, else pytorch_model.bin (torch.save's format),
// else the shards that model.safetensors.index.json or pytorch_model.bin.index.json lists, each
// shard's names checked against the index. `file` says which (for messages). Safetensors files
// are opened and their headers checked here, their data read later, a tensor at a time.
// std::invalid_argument naming the folder or file for none of them, a shard missing or holding
// other tensors than its index says, or a file that is not what its name says.
StoredTensors read_weights(const std::string& dir, std::string* file);

// Takes tensors out of the weights by name, as float32 tensors to be read when written, and says
// which were never taken. Names are the model's under `prefix` ("model." for a
// ...ForConditionalGeneration's save, "" for the bare model's), except `unprefixed` ones
// (lm_head.weight, final_logits_bias). Names and shapes are checked when taken, before anything
// is written.
class Weights {
 public:
  Weights(StoredTensors tensors, std::string file);

  bool has(const std::string& name) const;
  // std::invalid_argument naming the file and tensor when it is missing or of another shape.
  Pending take(const std::string& name, const std::vector<int64_t>& shape);
  // The same, its first dimension's rows in the order `rows` gives (an id table: rows may repeat),
  // read a block of rows at a time.
  Pending take_rows(const std::string& name, const std::vector<int64_t>& shape,
                    std::vector<int64_t> rows);
  // Read now: a tensor that must equal `expected` within `tolerance` where the file has it (a
  // position table).
  void check_same(const std::string& name, const torch::Tensor& expected, double tolerance,
                  const std::string& why);
  // Read now, a block of rows at a time: `copy`, where the file has it, equals `name` exactly (the
  // copies of tied weights that a pickled state dict holds).
  void check_copy(const std::string& copy, const std::string& name, const std::string& why);
  // Every tensor was given a place; else std::invalid_argument naming the first one left.
  void check_all_taken() const;

 private:
  std::string full(const std::string& name) const;
  bool has_prefix(const std::string& prefix) const;
  const StoredTensor& stored(const std::string& name, const std::vector<int64_t>& shape);

  StoredTensors tensors_;
  std::string file_, prefix_;
  std::set<std::string> taken_;
};

// A BART-family config.json's shape (d_model, the layers, heads and feed-forward width of both
// stacks, which Tandem's model shares), dropout and max_position_embeddings (default 1024) as
// Tandem's model config; refuses stacks of different widths or head counts, heads that do not
// divide d_model, and sizes below 1.
config::ModelConfig bart_shape(const Keys& keys);

// What the import leaves out: " (attention_dropout 0.1 is not Tandem's: it trains with dropout
// 0.1 alone)" for each of `names` that config.json sets to other than 0; "" when none.
std::string dropped_settings(const Keys& keys, std::initializer_list<const char*> names,
                             double dropout);

// The embedding matrix [vocab, d] a tied BART-family model shares (shared.weight, or either
// stack's embed_tokens), checked against every copy the file holds (the stacks',
// lm_head.weight): untied ones are refused. Its rows in the order `rows` gives (Tandem's ids).
Pending take_shared_embeddings(Weights& weights, int64_t vocab, int64_t d,
                               std::vector<int64_t> rows);

// Every layer of a BART-family model (MarianMT, M2M-100, NLLB-200: encoder.layers.N.self_attn...,
// self_attn_layer_norm, encoder_attn, encoder_attn_layer_norm, fc1, fc2, final_layer_norm) under
// Tandem's names (self_attn, self_attn_norm, cross_attn, cross_attn_norm, ffn.fc1, ffn.fc2,
// ffn_norm), into `out`: the same names before or after the sublayer (pre- or post-norm).
void take_bart_layers(Weights& weights, const config::ModelConfig& m, PendingTensors* out);

}  // namespace tandem::importer
