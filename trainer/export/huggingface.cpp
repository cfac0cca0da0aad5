#include "trainer/export/huggingface.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

#include "data/vocab/m2m100_languages.h"
#include "trainer/common/token_ids.h"
#include "trainer/decode/decode_options.h"
#include "trainer/export/model_tensors.h"
#include "trainer/export/safetensors_writer.h"

namespace tandem::exporter {
namespace {

using nlohmann::ordered_json;

// The folder's id table: for each of its ids, the Tandem id whose embedding row and output bias it
// takes and its piece; its special ids; the ids generate() must never produce.
struct HfVocab {
  std::vector<int64_t> rows;
  std::vector<std::string> pieces;
  int64_t pad = 0, eos = 0, unk = 0, start = 0;
  std::vector<int64_t> banned;
  bool bos_piece = false;  // "<s>" is a token of its own (decoded text leaves it out)
};

// An imported NLLB-200 or M2M-100 model's ids back: fairseq's dictionary (<s> <pad> </s> <unk>),
// then its other ids in order. The import gave Tandem's <pad> <unk> <s> </s> the model's pad, unk,
// eos and eos rows (the decoder starts with </s>) and moved the model's <s> last, as "<model <s>>".
HfVocab coded_vocab(const data::Vocab& vocab) {
  const int64_t n = vocab.size();
  if (n < 6 || vocab.piece(static_cast<int32_t>(n - 1)) != "<model <s>>") {
    throw std::invalid_argument(
        "the vocabulary has language codes but not the ids of an imported NLLB-200 or M2M-100 "
        "model (its last id is not the model's <s>): it has no transformers tokenizer");
  }
  HfVocab v;
  v.rows = {n - 1, kPadId, kEosId, kUnkId};
  v.pieces = {"<s>", "<pad>", "</s>", "<unk>"};
  for (int64_t id = kEosId + 1; id < n - 1; ++id) {
    v.rows.push_back(id);
    v.pieces.push_back(vocab.piece(static_cast<int32_t>(id)));
  }
  v.pad = 1, v.eos = v.start = 2, v.unk = 3;
  v.banned = {v.pad};  // Tandem's <pad>; its <s>, the eos row with a bias of -1e9, is not here
  return v;
}

// A vocabulary Tandem trained keeps its ids; an imported MarianMT one gets MarianMT's order back:
// </s>, <unk>, its other pieces, <pad> last, whose row is Tandem's <s> (the import gave Marian's
// pad row to both <s> and <pad>, Tandem's <pad> with an output bias of -1e9: the softmax is the
// same over the one row as over the two).
HfVocab hf_vocab(const data::Vocab& vocab) {
  if (vocab.coded()) return coded_vocab(vocab);
  HfVocab v;
  const int64_t n = vocab.size();
  if (!vocab.paired()) {
    for (int64_t id = 0; id < n; ++id) v.rows.push_back(id);
    v.pad = kPadId, v.eos = kEosId, v.unk = kUnkId, v.start = kBosId;
    v.banned = {kPadId, kBosId};  // tandem-decode's NeverEmitted
    v.bos_piece = true;
  } else {
    v.rows = {kEosId, kUnkId};
    for (int64_t id = kEosId + 1; id < n; ++id) v.rows.push_back(id);
    v.rows.push_back(kBosId);
    v.eos = 0, v.unk = 1, v.pad = v.start = n - 2;
    v.banned = {v.pad};
  }
  for (const int64_t row : v.rows) {
    const int64_t id = row == kBosId && !v.bos_piece ? kPadId : row;
    v.pieces.push_back(vocab.piece(static_cast<int32_t>(id)));
  }
  return v;
}

// The order of the model width's coordinates that MarianMT's sinusoid table needs: coordinate c
// of the export is coordinate order[c] of the model. Tandem's "halves" is MarianMT's table;
// "interleaved" puts sin(pos · f_i) at 2i and cos at 2i + 1, MarianMT at i and ceil(d/2) + i.
torch::Tensor width_order(int64_t d, model::PositionLayout layout) {
  if (layout != model::PositionLayout::kInterleaved) return torch::arange(d, torch::kLong);
  return torch::cat({torch::arange(0, d, 2, torch::kLong), torch::arange(1, d, 2, torch::kLong)});
}

// The model's tensors under transformers' names (MarianMT's and Pegasus's are BART's), the width
// reordered where a tensor meets the residual stream: the columns of what reads it, the rows of
// what writes to it, LayerNorm's entries, the position table's columns.
class HfTensors {
 public:
  HfTensors(const ModelTensors& t, torch::Tensor order) : t_(t), order_(std::move(order)) {}

  void reads(const std::string& hf, const std::string& tandem) {
    add(hf + ".weight", t_(tandem + ".weight").index_select(1, order_));
    add(hf + ".bias", t_(tandem + ".bias"));
  }
  void writes(const std::string& hf, const std::string& tandem) {
    add(hf + ".weight", t_(tandem + ".weight").index_select(0, order_));
    add(hf + ".bias", t_(tandem + ".bias").index_select(0, order_));
  }
  // A LayerNorm's weight and bias are per coordinate of the stream, as an output's rows are.
  void norm(const std::string& hf, const std::string& tandem) { writes(hf, tandem); }
  // An embedding matrix: rows by the folder's ids, columns reordered.
  void embedding(const std::string& hf, const std::string& tandem, const torch::Tensor& rows) {
    add(hf, t_(tandem).index_select(0, rows).index_select(1, order_));
  }
  void positions(const std::string& hf) { add(hf, t_("positions").index_select(1, order_)); }
  void add(const std::string& name, const torch::Tensor& value) {
    out_.emplace_back(name, value.contiguous());
  }
  void attention(const std::string& hf, const std::string& tandem) {
    for (const char* proj : {"q_proj", "k_proj", "v_proj"}) {
      reads(hf + "." + proj, tandem + "." + proj);
    }
    writes(hf + ".out_proj", tandem + ".out_proj");
  }
  const std::vector<std::pair<std::string, torch::Tensor>>& tensors() const { return out_; }

 private:
  const ModelTensors& t_;
  torch::Tensor order_;
  std::vector<std::pair<std::string, torch::Tensor>> out_;
};

// The transformers class that computes the model: MarianMT for post-norm layers; Pegasus for
// pre-norm ones (its layers normalise before each sublayer and its stacks end with a LayerNorm, as
// Tandem's pre-norm stacks do; its sinusoid table is MarianMT's, stored with the weights); M2M-100
// for fairseq's table (pre-norm, the table computed at load from the padding id, no output bias).
enum class Family { kMarian, kPegasus, kM2m100 };

Family family(const model::TransformerOptions& o) {
  if (o.positions == model::PositionLayout::kFairseq) return Family::kM2m100;
  return o.pre_norm ? Family::kPegasus : Family::kMarian;
}

std::vector<std::pair<std::string, torch::Tensor>> hf_tensors(const model::Transformer& model,
                                                               const HfVocab& vocab) {
  torch::NoGradGuard no_grad;
  const ModelTensors t(model);
  const model::TransformerOptions& o = model->options();
  HfTensors out(t, width_order(o.d_model, o.positions));
  const auto rows = torch::tensor(vocab.rows, torch::kLong);
  if (o.tie_embeddings) {
    out.embedding("model.shared.weight", "src_embed.weight", rows);
  } else {
    out.embedding("model.encoder.embed_tokens.weight", "src_embed.weight", rows);
    out.embedding("model.decoder.embed_tokens.weight", "tgt_embed.weight", rows);
    out.embedding("lm_head.weight", "output_proj.weight", rows);
  }
  const auto bias = t("output_proj.bias").index_select(0, rows);
  if (family(o) != Family::kM2m100) out.add("final_logits_bias", bias.unsqueeze(0));
  for (const char* stack : {"encoder", "decoder"}) {
    const bool decoder = std::string(stack) == "decoder";
    const int64_t layers = decoder ? o.decoder_layers : o.encoder_layers;
    for (int64_t i = 0; i < layers; ++i) {
      const std::string tandem = std::string(stack) + ".layers." + std::to_string(i) + ".";
      const std::string hf = "model." + tandem;
      out.attention(hf + "self_attn", tandem + "self_attn");
      out.norm(hf + "self_attn_layer_norm", tandem + "self_attn_norm");
      if (decoder) {
        out.attention(hf + "encoder_attn", tandem + "cross_attn");
        out.norm(hf + "encoder_attn_layer_norm", tandem + "cross_attn_norm");
      }
      out.reads(hf + "fc1", tandem + "ffn.fc1");
      out.writes(hf + "fc2", tandem + "ffn.fc2");
      out.norm(hf + "final_layer_norm", tandem + "ffn_norm");
    }
    if (o.pre_norm) {
      out.norm("model." + std::string(stack) + ".layer_norm", std::string(stack) + ".final_norm");
    }
    if (family(o) == Family::kPegasus) {
      out.positions("model." + std::string(stack) + ".embed_positions.weight");
    }
  }
  return out.tensors();
}

ordered_json hf_config(const model::TransformerOptions& o, const HfVocab& v) {
  const auto n = static_cast<int64_t>(v.rows.size());
  const Family f = family(o);
  const char* type = f == Family::kMarian    ? "marian"
                     : f == Family::kPegasus ? "pegasus"
                                             : "m2m_100";
  const char* model = f == Family::kMarian    ? "MarianMTModel"
                      : f == Family::kPegasus ? "PegasusForConditionalGeneration"
                                              : "M2M100ForConditionalGeneration";
  ordered_json config = {{"architectures", {model}}, {"model_type", type}, {"vocab_size", n}};
  if (f == Family::kMarian) config["decoder_vocab_size"] = n;
  config.update(ordered_json{
      {"d_model", o.d_model},
      {"encoder_layers", o.encoder_layers},
      {"decoder_layers", o.decoder_layers},
      {"encoder_attention_heads", o.heads},
      {"decoder_attention_heads", o.heads},
      {"encoder_ffn_dim", o.d_ff},
      {"decoder_ffn_dim", o.d_ff},
      {"activation_function", o.activation == model::Activation::kSwish ? "swish" : "relu"},
      {"dropout", o.dropout},
      {"attention_dropout", 0.0},
      {"activation_dropout", 0.0},
      {"encoder_layerdrop", 0.0},
      {"decoder_layerdrop", 0.0},
      {"max_position_embeddings", o.max_positions},
      {"scale_embedding", true}});
  if (f == Family::kMarian) config["share_encoder_decoder_embeddings"] = o.tie_embeddings;
  if (f == Family::kM2m100) config["bos_token_id"] = 0;
  config.update(ordered_json{{"tie_word_embeddings", o.tie_embeddings},
                             {"is_encoder_decoder", true},
                             {"pad_token_id", v.pad},
                             {"eos_token_id", v.eos},
                             {"decoder_start_token_id", v.start},
                             {"dtype", "float32"}});
  return config;
}

// tandem-decode's search as far as generate() has it: beam 4, length penalty 0.6 (fairseq's
// normalisation, as transformers' beam search), at least one token before </s>, never <pad> or
// <s>. Its a · length + b limit has no counterpart: max_length is the positions' table.
// tandem-decode's search as far as generate() has it: beam 4, length penalty 0.6 (fairseq's
// normalisation, as transformers' beam search), at least one token before </s>, never what
// tandem-decode never emits; with a target language, its code first (forced_bos_token_id). Its
// a · length + b limit has no counterpart: max_length is the positions' table.
ordered_json generation_config(const model::TransformerOptions& o, const HfVocab& v,
                               int64_t target_code) {
  const decode::DecodeOptions defaults;
  ordered_json banned = ordered_json::array();
  for (const int64_t id : v.banned) banned.push_back({id});
  ordered_json config = {{"decoder_start_token_id", v.start},
                         {"eos_token_id", v.eos},
                         {"pad_token_id", v.pad},
                         {"bad_words_ids", banned},
                         {"num_beams", defaults.beam_size},
                         {"length_penalty", defaults.length_penalty},
                         {"min_new_tokens", defaults.min_len},
                         {"max_length", o.max_positions}};
  if (target_code >= 0) config["forced_bos_token_id"] = target_code;
  return config;
}

// Whether the model's language codes are M2M-100's tokens (__en__), not NLLB-200's (eng_Latn).
bool m2m100_codes(const data::Vocab& vocab) {
  return vocab.coded() && vocab.piece(vocab.language_codes().front().id).rfind("__", 0) == 0;
}

// The folder's id of a Tandem id (the first that takes its row).
int64_t hf_id(const HfVocab& v, int64_t tandem_id) {
  for (size_t id = 0; id < v.rows.size(); ++id) {
    if (v.rows[id] == tandem_id) return static_cast<int64_t>(id);
  }
  return -1;
}

// M2M100Tokenizer's files for an imported M2M-100 model: its SentencePiece model, vocab.json (the
// model's ids of every token before the language codes, which follow them in the order of the
// tokenizer's language_codes setting), and that setting; the languages given, as src_lang and
// tgt_lang. std::invalid_argument when the codes are not one setting's list.
// special_tokens_map.json (`specials`) and tokenizer_config.json (`config`, the specials and the
// languages given as src_lang and tgt_lang) of a tokenizer with language codes.
void write_coded_tokenizer_config(ordered_json config, const ordered_json& specials,
                                  const HfLanguages& languages, const std::string& dir) {
  write_text(dir + "/special_tokens_map.json", specials.dump(2) + "\n");
  config["src_lang"] = nullptr;
  config["tgt_lang"] = nullptr;
  if (!languages.source.empty()) config["src_lang"] = languages.source;
  if (!languages.target.empty()) config["tgt_lang"] = languages.target;
  config.update(specials);
  write_text(dir + "/tokenizer_config.json", config.dump(2) + "\n");
}

// M2M100Tokenizer's language_codes setting that lists the model's codes in their order;
// std::invalid_argument when none does.
std::string m2m100_setting(const data::Vocab& vocab) {
  std::vector<std::string> codes;
  for (const auto& code : vocab.language_codes()) codes.push_back(code.language);
  for (const auto& [name, list] : data::m2m100_language_lists()) {
    if (list == codes) return name;
  }
  throw std::invalid_argument("the model's " + std::to_string(codes.size()) +
                              " language codes are not M2M100Tokenizer's m2m100 or wmt21 list: "
                              "no transformers tokenizer numbers them as the model does");
}

void write_m2m100_tokenizer(const data::Vocab& vocab, const HfVocab& v,
                            const HfLanguages& languages, const std::string& dir) {
  const std::string setting = m2m100_setting(vocab);
  const int64_t first_code = hf_id(v, vocab.language_codes().front().id);
  ordered_json pieces = ordered_json::object();
  for (int64_t id = 0; id < first_code; ++id) pieces[v.pieces[static_cast<size_t>(id)]] = id;
  write_text(dir + "/vocab.json", pieces.dump(2) + "\n");
  write_text(dir + "/sentencepiece.bpe.model", vocab.sentencepiece_bytes(data::Side::kSource));
  ordered_json specials = {{"bos_token", "<s>"},
                           {"eos_token", "</s>"},
                           {"sep_token", "</s>"},
                           {"unk_token", "<unk>"},
                           {"pad_token", "<pad>"}};
  write_coded_tokenizer_config({{"tokenizer_class", "M2M100Tokenizer"},
                                {"language_codes", setting},
                                {"num_madeup_words", 8},
                                {"model_max_length", 1024}},
                               specials, languages, dir);
}

// NllbTokenizer's files for an imported NLLB-200 model: its SentencePiece model (the pieces at
// their id + 1 after <s> <pad> </s> <unk>), the language codes in id order, and every special
// token at the model's id (added_tokens_decoder: where <mask> and the codes stand is the
// model's, whichever order a tokenizer version would give them); the languages given.
void write_nllb_tokenizer(const data::Vocab& vocab, const HfVocab& v,
                          const HfLanguages& languages, const std::string& dir) {
  write_text(dir + "/sentencepiece.bpe.model", vocab.sentencepiece_bytes(data::Side::kSource));
  ordered_json codes = ordered_json::array();
  for (const auto& code : vocab.language_codes()) codes.push_back(vocab.piece(code.id));
  // Every token beyond SentencePiece's pieces at its id, as transformers saves them: the four
  // specials, the codes and the other specials (<mask>).
  ordered_json added = ordered_json::object();
  for (size_t id = 0; id < v.rows.size(); ++id) {
    const auto row = static_cast<int32_t>(v.rows[id]);
    if (id > 3 && !vocab.special(row)) continue;
    if (v.pieces[id].rfind("<unused ", 0) == 0) continue;  // rows no token names
    added[std::to_string(id)] = {{"content", v.pieces[id]}, {"lstrip", false},
                                 {"normalized", false},     {"rstrip", false},
                                 {"single_word", false},    {"special", true}};
  }
  ordered_json specials = {{"bos_token", "<s>"},   {"eos_token", "</s>"},  {"sep_token", "</s>"},
                           {"cls_token", "<s>"},   {"unk_token", "<unk>"}, {"pad_token", "<pad>"},
                           {"mask_token", "<mask>"}};
  write_coded_tokenizer_config({{"tokenizer_class", "NllbTokenizer"},
                                {"added_tokens_decoder", added},
                                {"additional_special_tokens", codes},
                                {"legacy_behaviour", false},
                                {"model_max_length", 1024}},
                               specials, languages, dir);
}

// MarianTokenizer's files: the SentencePiece models and vocab.json, the folder's ids.
void write_marian_tokenizer(const data::Vocab& vocab, const HfVocab& v, const std::string& dir) {
  write_text(dir + "/source.spm", vocab.sentencepiece_bytes(data::Side::kSource));
  write_text(dir + "/target.spm", vocab.sentencepiece_bytes(data::Side::kTarget));
  ordered_json pieces = ordered_json::object();
  for (size_t id = 0; id < v.pieces.size(); ++id) pieces[v.pieces[id]] = id;
  write_text(dir + "/vocab.json", pieces.dump(2) + "\n");
  ordered_json specials = {{"eos_token", v.pieces[static_cast<size_t>(v.eos)]},
                           {"unk_token", v.pieces[static_cast<size_t>(v.unk)]},
                           {"pad_token", v.pieces[static_cast<size_t>(v.pad)]}};
  if (v.bos_piece) specials["bos_token"] = v.pieces[kBosId];
  write_text(dir + "/special_tokens_map.json", specials.dump(2) + "\n");
  ordered_json config = {{"tokenizer_class", "MarianTokenizer"},
                         {"model_max_length", 512},
                         {"separate_vocabs", false},
                         {"source_lang", nullptr},
                         {"target_lang", nullptr}};
  config.update(specials);
  write_text(dir + "/tokenizer_config.json", config.dump(2) + "\n");
}

// std::invalid_argument, one line naming the setting and what to train instead, for a model no
// transformers class computes as Tandem does; or a language the model has no code for.
void check_huggingface(const checkpoint::InferenceModel& model, const HfLanguages& languages) {
  const config::ModelConfig& m = model.config.model;
  const data::Vocab& vocab = model.vocab;
  if (vocab.coded()) {
    if (m2m100_codes(vocab)) m2m100_setting(vocab);
    for (const std::string* language : {&languages.source, &languages.target}) {
      if (!language->empty() && vocab.code_id(*language) < 0) {
        throw std::invalid_argument("language '" + *language + "': the model has no code for it (" +
                                    vocab.nearest_languages(*language, 3) + "?)");
      }
    }
  } else if (!languages.source.empty() || !languages.target.empty()) {
    throw std::invalid_argument(
        "--source-lang and --target-lang are for a model with language codes (NLLB-200); a "
        "model with >>xx<< tags reads the tag at the start of each source line");
  }
  if (m.positions == config::PositionLayout::kFairseq) {
    if (!m.pre_norm) {
      throw std::invalid_argument(
          "model.positions: fairseq with post-norm layers: no transformers class computes that "
          "table with post-norm layers; train with model.positions: interleaved or halves");
    }
    // M2M-100's output has no bias: the model's must be zero where the folder has rows.
    if (!vocab.coded()) {
      throw std::invalid_argument(
          "model.positions: fairseq: transformers computes that table in M2M-100's classes, "
          "whose output has no bias, and a model trained here has one; train with "
          "model.positions: interleaved or halves (Pegasus, MarianMT)");
    }
    torch::NoGradGuard no_grad;
    const auto bias = model.model->named_parameters()["output_proj.bias"]
                          .to(torch::kCPU, torch::kFloat)
                          .index_select(0, torch::tensor(hf_vocab(vocab).rows, torch::kLong));
    if (bias.abs().max().item<float>() != 0.0f) {
      throw std::invalid_argument(
          "output_proj.bias is not zero: transformers computes this model (fairseq's table) in "
          "M2M-100's classes, whose output has no bias; an imported NLLB-200 keeps it zero when "
          "fine-tuned with LoRA (lora.*), not when fine-tuned in full");
    }
  }
  if (m.pre_norm && !m.tie_embeddings) {
    throw std::invalid_argument(
        "model.tie_embeddings: false with model.pre_norm: true: transformers' pre-norm classes "
        "share one embedding between encoder and decoder; train with model.tie_embeddings: "
        "true, or post-norm layers (MarianMT has untied ones)");
  }
}

}  // namespace

void write_hf_folder(const checkpoint::InferenceModel& model, const HfLanguages& languages,
                     const Provenance& provenance, const std::string& dir) {
  check_huggingface(model, languages);
  const HfVocab vocab = hf_vocab(model.vocab);
  const model::TransformerOptions& o = model.model->options();
  write_safetensors(dir + "/model.safetensors", hf_tensors(model.model, vocab));
  write_text(dir + "/config.json", hf_config(o, vocab).dump(2) + "\n");
  const int64_t target =
      languages.target.empty() ? -1 : hf_id(vocab, model.vocab.code_id(languages.target));
  write_text(dir + "/generation_config.json",
             generation_config(o, vocab, target).dump(2) + "\n");
  if (m2m100_codes(model.vocab)) {
    write_m2m100_tokenizer(model.vocab, vocab, languages, dir);
  } else if (model.vocab.coded()) {
    write_nllb_tokenizer(model.vocab, vocab, languages, dir);
  } else {
    write_marian_tokenizer(model.vocab, vocab, dir);
  }
  write_text(dir + "/tandem.json", provenance_json(provenance).dump(2) + "\n");
}

}  // namespace tandem::exporter
