#include "trainer/import/m2m100.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "data/vocab/m2m100_languages.h"
#include "data/vocab/vocab.h"
#include "trainer/common/token_ids.h"
#include "trainer/config/config.h"
#include "trainer/import/hf_folder.h"
#include "trainer/model/transformer.h"

namespace tandem::importer {
namespace {

using nlohmann::json;

// Output bias of Tandem's start row, a copy of </s>: its softmax share is exactly 0 in float32.
constexpr float kNeverBias = -1e9f;

// config.json's layers as Tandem's model config; refuses what Tandem would compute otherwise.
config::ModelConfig model_config(const Keys& keys, std::string* notes) {
  if (keys.text("model_type") != "m2m_100") {
    keys.refuse("model_type", "not an M2M-100 or NLLB-200 model (expected \"m2m_100\")");
  }
  config::ModelConfig m = bart_shape(keys);
  if (m.d_model < 4) keys.refuse("d_model", "fairseq's position table needs at least 4");
  m.pre_norm = true;
  m.tie_embeddings = true;
  m.positions = config::PositionLayout::kFairseq;
  const std::string activation = keys.text_or("activation_function", "relu");
  if (activation == "relu") {
    m.activation = config::Activation::kRelu;
  } else if (activation == "swish" || activation == "silu") {
    m.activation = config::Activation::kSwish;
  } else {
    keys.refuse("activation_function", "Tandem's feed-forward is relu or swish (silu)");
  }
  if (!keys.boolean_or("scale_embedding", true)) {
    keys.refuse("scale_embedding", "Tandem scales embeddings by sqrt(d_model), as M2M-100 does");
  }
  if (!keys.boolean_or("tie_word_embeddings", true)) {
    keys.refuse("tie_word_embeddings", "an output layer apart from the embeddings is not imported");
  }
  *notes += dropped_settings(
      keys, {"attention_dropout", "activation_dropout", "encoder_layerdrop", "decoder_layerdrop"},
      m.dropout);
  return m;
}

// The model's special ids, as config.json gives them (checked against the tokenizer's later).
struct ModelIds {
  int64_t vocab_size, pad, eos;
};

ModelIds model_ids(const Keys& keys) {
  ModelIds ids{keys.integer("vocab_size"), keys.integer_or("pad_token_id", 1),
               keys.integer_or("eos_token_id", 2)};
  if (ids.vocab_size < 5) keys.refuse("vocab_size", "expected the 4 specials and more");
  // fairseq's positions start after the padding index: Tandem's table is for index 1.
  if (ids.pad != 1) keys.refuse("pad_token_id", "expected 1, as fairseq's position table is");
  if (ids.eos < 0 || ids.eos >= ids.vocab_size || ids.eos == ids.pad) {
    keys.refuse("eos_token_id", "outside the vocabulary, or pad_token_id");
  }
  if (keys.integer_or("decoder_start_token_id", ids.eos) != ids.eos) {
    keys.refuse("decoder_start_token_id",
                "expected eos_token_id (</s>), as every M2M-100 and NLLB-200 model has");
  }
  return ids;
}

// The tokenizer's table: the text of each of the model's ids, which of them are language codes
// (and of which language), and which are other specials.
struct Table {
  std::vector<std::string> pieces;  // by the model's id; "" where the tokenizer has none
  std::vector<data::LanguageCode> codes;
  std::set<int64_t> specials;
  std::string kind;  // "nllb" or "m2m100"
};

// A token of a tokenizer file's list: a string, or an object with "content".
std::string token_text(const json& item) {
  if (item.is_string()) return item.get<std::string>();
  if (item.is_object() && item.contains("content") && item["content"].is_string()) {
    return item["content"].get<std::string>();
  }
  return "";
}

// The additional special tokens a tokenizer lists (language codes, in id order), from
// tokenizer_config.json (additional_special_tokens, or extra_special_tokens as transformers 5
// writes it), else special_tokens_map.json.
std::vector<std::string> listed_specials(const std::string& dir) {
  std::vector<std::string> out;
  for (const char* name : {"tokenizer_config.json", "special_tokens_map.json"}) {
    const std::string path = dir + "/" + name;
    if (!is_file(path)) continue;
    const json j = read_json(path);
    for (const char* key : {"additional_special_tokens", "extra_special_tokens"}) {
      if (!j.is_object() || !j.contains(key) || !j[key].is_array()) continue;
      for (const auto& item : j[key]) {
        if (!token_text(item).empty()) out.push_back(token_text(item));
      }
      if (!out.empty()) return out;
    }
  }
  return out;
}

// Tokens with their ids beyond the SentencePiece pieces: tokenizer.json's added_tokens, else
// tokenizer_config.json's added_tokens_decoder; empty when neither file says.
std::map<int64_t, std::string> added_tokens(const std::string& dir, std::string* source) {
  std::map<int64_t, std::string> out;
  const std::string tokenizer = dir + "/tokenizer.json";
  if (is_file(tokenizer)) {
    const json j = read_json(tokenizer);
    if (j.is_object() && j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const auto& token : j["added_tokens"]) {
        if (!token.is_object() || !token.contains("id") || !token["id"].is_number_integer() ||
            token_text(token).empty()) {
          throw std::invalid_argument(tokenizer +
                                      ": an added_tokens entry without an integer "
                                      "id and a content: " +
                                      token.dump().substr(0, 100));
        }
        out[token["id"].get<int64_t>()] = token_text(token);
      }
      *source = tokenizer;
      return out;
    }
  }
  const std::string config = dir + "/tokenizer_config.json";
  if (is_file(config)) {
    const json j = read_json(config);
    if (j.is_object() && j.contains("added_tokens_decoder") &&
        j["added_tokens_decoder"].is_object()) {
      for (const auto& [id, token] : j["added_tokens_decoder"].items()) {
        char* end = nullptr;
        const long long value = std::strtoll(id.c_str(), &end, 10);
        if (id.empty() || *end != '\0' || value < 0 || token_text(token).empty()) {
          throw std::invalid_argument(config + ": added_tokens_decoder[\"" + id +
                                      "\"]: expected an id and a token with content");
        }
        out[value] = token_text(token);
      }
      *source = config;
    }
  }
  return out;
}

// Puts `text` at the model's id `id`, which must be new and inside the model's vocabulary.
void place(Table& t, int64_t id, const std::string& text, const std::string& from) {
  if (id < 0 || id >= static_cast<int64_t>(t.pieces.size())) {
    throw std::invalid_argument(from + ": token '" + text + "' has id " + std::to_string(id) +
                                ", outside config.json's vocab_size " +
                                std::to_string(t.pieces.size()));
  }
  if (!t.pieces[id].empty() && t.pieces[id] != text) {
    throw std::invalid_argument(from + ": id " + std::to_string(id) + " is both '" + t.pieces[id] +
                                "' and '" + text + "'");
  }
  t.pieces[id] = text;
}

// NLLB-200 (NllbTokenizer): SentencePiece's pieces from its id 3 on at id + 1 after <s> <pad>
// </s> <unk> (fairseq's dictionary), then the language codes and <mask>, whose ids the tokenizer
// files give (or, without them, the codes in their listed order and <mask> after them).
void nllb_table(const std::string& dir, const data::Vocab& spm, Table& t) {
  t.kind = "nllb";
  const std::vector<std::string> listed = listed_specials(dir);
  std::string source;
  std::map<int64_t, std::string> added = added_tokens(dir, &source);
  if (added.empty()) {  // the slow tokenizer's rule
    source = dir + "/tokenizer_config.json";
    int64_t next = spm.size() + 1;
    for (const std::string& code : listed) added[next++] = code;
    added[next] = "<mask>";
  }
  // The converter's rule assumes SentencePiece's own layout: <unk> <s> </s>, then the pieces.
  const std::string spm_path = dir + "/sentencepiece.bpe.model";
  const std::vector<std::string> own = {"<unk>", "<s>", "</s>"};
  for (int32_t id = 0; id < 3; ++id) {
    if (spm.size() <= 3 || spm.piece(id) != own[id]) {
      throw std::invalid_argument(spm_path + ": piece " + std::to_string(id) + " is '" +
                                  (spm.size() > id ? spm.piece(id) : "") +
                                  "', where NllbTokenizer expects <unk> <s> </s> first");
    }
  }
  const std::vector<std::string> specials = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int64_t id = 0; id < 4; ++id) place(t, id, specials[id], spm_path);
  for (int64_t id = 3; id < spm.size(); ++id) {
    place(t, id + 1, spm.piece(static_cast<int32_t>(id)), spm_path);
  }
  const std::set<std::string> codes(listed.begin(), listed.end());
  for (const auto& [id, text] : added) {
    if (id < 4) continue;  // the four specials, placed above
    place(t, id, text, source);
    if (codes.count(text)) {
      t.codes.push_back({text, static_cast<int32_t>(id)});
    } else {
      t.specials.insert(id);
    }
  }
}

// M2M-100 (M2M100Tokenizer): vocab.json's ids for the pieces, then the language codes __xx__ at
// the ids that follow, in the tokenizer's order (its listed tokens, else its language_codes
// setting's list).
void m2m100_table(const std::string& dir, Table& t) {
  t.kind = "m2m100";
  const std::string path = dir + "/vocab.json";
  const json vocab = read_json(path);
  if (!vocab.is_object()) throw std::invalid_argument(path + ": expected an object piece -> id");
  for (const auto& [piece, id] : vocab.items()) {
    if (!id.is_number_integer()) {
      throw std::invalid_argument(path + ": piece '" + piece + "' has id " + id.dump());
    }
    place(t, id.get<int64_t>(), piece, path);
  }
  std::vector<std::string> listed;
  for (const std::string& token : listed_specials(dir)) {
    if (token.size() > 4 && token.compare(0, 2, "__") == 0 &&
        token.compare(token.size() - 2, 2, "__") == 0) {
      listed.push_back(token);
    }
  }
  std::string source = dir + "/special_tokens_map.json";
  if (listed.empty()) {
    const std::string config_path = dir + "/tokenizer_config.json";
    std::string setting = "m2m100";
    if (is_file(config_path)) {
      const Keys config(read_json(config_path), config_path);
      setting = config.text_or("language_codes", setting);
      const auto list = data::m2m100_language_lists().find(setting);
      if (list == data::m2m100_language_lists().end()) {
        config.refuse("language_codes", "expected \"m2m100\" or \"wmt21\"");
      }
    }
    for (const std::string& code : data::m2m100_language_lists().at(setting)) {
      listed.push_back("__" + code + "__");
    }
    source = config_path + " (language_codes " + setting + ")";
  }
  auto next = static_cast<int64_t>(vocab.size());
  for (const std::string& token : listed) {
    place(t, next, token, source);
    t.codes.push_back({token.substr(2, token.size() - 4), static_cast<int32_t>(next++)});
  }
}

// The model's id of a special token the tokenizer must have.
int64_t special_id(const Table& t, const std::string& text, const std::string& dir) {
  const auto it = std::find(t.pieces.begin(), t.pieces.end(), text);
  if (it == t.pieces.end()) {
    throw std::invalid_argument("'" + dir + "': the tokenizer has no " + text);
  }
  return it - t.pieces.begin();
}

// Tandem's id table (see m2m100.h) and the model's row of each Tandem id.
struct IdTable {
  std::vector<std::string> pieces;
  std::vector<int64_t> model_row;
  data::PairExtras extras;
};

IdTable id_table(const Table& t, const ModelIds& ids, const std::string& dir) {
  const int64_t pad = special_id(t, "<pad>", dir), unk = special_id(t, "<unk>", dir),
                eos = special_id(t, "</s>", dir);
  if (pad != ids.pad || eos != ids.eos) {
    throw std::invalid_argument("'" + dir + "': the tokenizer's <pad> and </s> are ids " +
                                std::to_string(pad) + " and " + std::to_string(eos) +
                                ", config.json's pad_token_id and eos_token_id " +
                                std::to_string(ids.pad) + " and " + std::to_string(ids.eos));
  }
  IdTable out{{"<pad>", "<unk>", "<s>", "</s>"}, {pad, unk, eos, eos}, {}};
  std::vector<int64_t> moved;  // the model's ids below 4 that Tandem's specials do not take
  const auto size = static_cast<int64_t>(t.pieces.size());
  for (int64_t id = 0; id < size; ++id) {
    if (id == pad || id == unk || id == eos) continue;
    if (id <= kEosId) {
      moved.push_back(id);
      continue;
    }
    out.pieces.push_back(t.pieces[id]);
    out.model_row.push_back(id);
  }
  for (const int64_t id : moved) {
    out.pieces.push_back(t.pieces[id]);
    out.model_row.push_back(id);
  }
  // The model's id of each Tandem id is its row; the codes and specials keep their names.
  std::map<int64_t, int32_t> tandem_id;
  for (size_t i = 0; i < out.model_row.size(); ++i) {
    tandem_id.emplace(out.model_row[i], static_cast<int32_t>(i));
  }
  for (size_t i = 0; i < out.pieces.size(); ++i) {
    const int64_t row = out.model_row[i];
    if (i <= static_cast<size_t>(kEosId)) continue;
    const bool nameless = out.pieces[i].empty();
    // The model's <s> (never produced by its tokenizer) and rows no token names: kept, skipped
    // by detokenization, under names no text gives.
    if (nameless || row <= kEosId) {
      out.pieces[i] =
          nameless ? "<unused " + std::to_string(row) + ">" : "<model " + out.pieces[i] + ">";
      out.extras.specials.push_back(static_cast<int32_t>(i));
    } else if (t.specials.count(row)) {
      out.extras.specials.push_back(static_cast<int32_t>(i));
    }
  }
  for (const data::LanguageCode& code : t.codes) {
    out.extras.codes.push_back({code.language, tandem_id.at(code.id)});
  }
  return out;
}

// Every tensor under Tandem's name, rows in Tandem's id order.
PendingTensors tandem_tensors(Weights& weights, const config::ModelConfig& m, int64_t model_vocab,
                              const IdTable& table) {
  const int64_t d = m.d_model;
  PendingTensors named;
  named["src_embed.weight"] = take_shared_embeddings(weights, model_vocab, d, table.model_row);
  auto bias = torch::zeros({static_cast<int64_t>(table.model_row.size())});
  bias[kBosId] = kNeverBias;
  named["output_proj.bias"] = Pending::held(bias);
  // transformers computes fairseq's table at load; a file that holds one holds that table
  // (offset by the padding index: rows 0 and 1 precede position 0).
  const auto positions =
      model::sinusoidal_positions(m.max_positions + 2, d, model::PositionLayout::kFairseq);
  for (const char* stack : {"encoder", "decoder"}) {
    const std::string name = std::string(stack) + ".embed_positions.weights";
    if (weights.has(name)) {
      const auto table_rows = weights.take(name, {m.max_positions + 2, d}).make().slice(0, 2);
      if (!(table_rows.sub(positions.slice(0, 0, m.max_positions)).abs().max().item<double>() <=
            1e-3)) {
        throw std::invalid_argument("tensor '" + name + "' is not fairseq's sinusoid table");
      }
    }
  }
  for (const char* stack : {"encoder", "decoder"}) {
    for (const char* part : {"weight", "bias"}) {
      named[std::string(stack) + ".final_norm." + part] =
          weights.take(std::string(stack) + ".layer_norm." + part, {d});
    }
  }
  take_bart_layers(weights, m, &named);
  weights.check_all_taken();
  return named;
}

std::string describe(const config::ModelConfig& m, const Table& t, int64_t model_vocab,
                     int64_t tandem_vocab) {
  std::ostringstream out;
  out << t.kind << ": " << m.encoder_layers << "+" << m.decoder_layers << " layers, d_model "
      << m.d_model << ", " << m.heads << " heads, d_ff " << m.d_ff << ", "
      << (m.activation == config::Activation::kSwish ? "swish" : "relu") << ", pre-norm, dropout "
      << m.dropout << ", " << model_vocab << " ids (" << tandem_vocab << " in Tandem), "
      << t.codes.size() << " language codes";
  return out.str();
}

}  // namespace

ImportedModel import_m2m100(const std::string& dir) {
  if (!is_dir(dir)) throw std::invalid_argument("'" + dir + "' is not a folder");
  const std::string config_path = dir + "/config.json";
  if (!is_file(config_path)) throw std::invalid_argument("'" + dir + "' has no config.json");
  const Keys keys(read_json(config_path), config_path);
  std::string notes;
  config::Config config;
  config.model = model_config(keys, &notes);
  const ModelIds ids = model_ids(keys);
  const std::string spm_path = dir + "/sentencepiece.bpe.model";
  if (!is_file(spm_path)) {
    throw std::invalid_argument("'" + dir +
                                "' has no sentencepiece.bpe.model (an M2M-100 or "
                                "NLLB-200 folder holds it beside config.json)");
  }
  const std::string spm_bytes = read_input_file(spm_path);
  Table table;
  table.pieces.resize(ids.vocab_size);
  std::string tokenizer_class;
  if (is_file(dir + "/tokenizer_config.json")) {
    const Keys tokenizer(read_json(dir + "/tokenizer_config.json"), dir + "/tokenizer_config.json");
    tokenizer_class = tokenizer.text_or("tokenizer_class", "");
  }
  const bool m2m = tokenizer_class.rfind("M2M100", 0) == 0 ||
                   (tokenizer_class.empty() && is_file(dir + "/vocab.json"));
  if (m2m) {
    m2m100_table(dir, table);
  } else {
    nllb_table(dir, data::Vocab::from_bytes(spm_bytes), table);
  }
  if (table.codes.empty()) {
    throw std::invalid_argument("'" + dir + "': the tokenizer has no language codes (" +
                                (m2m ? "__en__" : "eng_Latn") +
                                " ...): neither tokenizer_config.json nor "
                                "special_tokens_map.json lists them");
  }
  const IdTable id_map = id_table(table, ids, dir);
  const auto vocab_size = static_cast<int64_t>(id_map.pieces.size());
  const data::Vocab vocab =
      data::Vocab::from_pair(spm_bytes, spm_bytes, id_map.pieces, id_map.extras);

  std::string weights_file;
  Weights weights(read_weights(dir, &weights_file), weights_file);
  const auto named = tandem_tensors(weights, config.model, ids.vocab_size, id_map);
  return imported_model(dir, config, vocab, named,
                        describe(config.model, table, ids.vocab_size, vocab_size) + notes);
}

}  // namespace tandem::importer
