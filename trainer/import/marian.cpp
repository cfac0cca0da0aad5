#include "trainer/import/marian.h"

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

#include "data/vocab/vocab.h"
#include "trainer/common/token_ids.h"
#include "trainer/config/config.h"
#include "trainer/import/hf_folder.h"
#include "trainer/model/transformer.h"

namespace tandem::importer {
namespace {

using nlohmann::json;

// Output bias of Tandem's own pad row: its softmax share is exactly 0 in float32.
constexpr float kNeverBias = -1e9f;

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
  config::ModelConfig m = bart_shape(keys);
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
  *notes += dropped_settings(keys, {"attention_dropout", "activation_dropout"}, m.dropout);
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
PendingTensors tandem_tensors(Weights& weights, const config::ModelConfig& m, int64_t marian_vocab,
                              const IdTable& table) {
  const int64_t d = m.d_model;
  PendingTensors named;
  named["src_embed.weight"] = take_shared_embeddings(weights, marian_vocab, d, table.marian_row);
  const auto rows = torch::tensor(table.marian_row, torch::kLong);
  const auto tandem_bias = [rows](const torch::Tensor& marian) {
    auto bias = marian.index_select(0, rows).contiguous();
    bias[kPadId] = kNeverBias;
    return bias;
  };
  if (weights.has("final_logits_bias")) {
    const Pending file_bias = weights.take("final_logits_bias", {1, marian_vocab});
    named["output_proj.bias"] = Pending{
        {rows.size(0)}, [file_bias, tandem_bias] { return tandem_bias(file_bias.make()[0]); }};
  } else {
    named["output_proj.bias"] = Pending::held(tandem_bias(torch::zeros({marian_vocab})));
  }
  // MarianMT computes its sinusoid table at load; a file that holds one holds that table.
  const auto positions =
      model::sinusoidal_positions(m.max_positions, d, model::PositionLayout::kHalves);
  for (const char* stack : {"encoder", "decoder"}) {
    weights.check_same(std::string(stack) + ".embed_positions.weight", positions, 1e-3,
                       "the sinusoid table (sin in the first half of the columns, cos in the "
                       "second) that MarianMT computes");
  }
  take_bart_layers(weights, m, &named);
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
  const data::Vocab vocab = data::Vocab::from_pair(read_input_file(dir + "/source.spm"),
                                                   read_input_file(dir + "/target.spm"),
                                                   table.pieces);

  std::string weights_file;
  Weights weights(read_weights(dir, &weights_file), weights_file);
  const auto named = tandem_tensors(weights, config.model, marian_vocab, table);
  return imported_model(dir, config, vocab, named,
                        describe(config.model, marian_vocab, vocab_size) + notes);
}

}  // namespace tandem::importer
