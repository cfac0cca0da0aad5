#include "trainer/export/huggingface.h"

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

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

// A vocabulary Tandem trained keeps its ids; an imported MarianMT one gets MarianMT's order back:
// </s>, <unk>, its other pieces, <pad> last, whose row is Tandem's <s> (the import gave Marian's
// pad row to both <s> and <pad>, Tandem's <pad> with an output bias of -1e9: the softmax is the
// same over the one row as over the two).
HfVocab hf_vocab(const data::Vocab& vocab) {
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
    v.pieces.push_back(vocab.piece(static_cast<int32_t>(row == kBosId && !v.bos_piece ? kPadId
                                                                                      : row)));
  }
  return v;
}

// The order of the model width's coordinates that MarianMT's sinusoid table needs: coordinate c
// of the export is coordinate order[c] of the model. Tandem's "halves" is MarianMT's table;
// "interleaved" puts sin(pos · f_i) at 2i and cos at 2i + 1, MarianMT at i and ceil(d/2) + i.
torch::Tensor width_order(int64_t d, model::PositionLayout layout) {
  if (layout == model::PositionLayout::kHalves) return torch::arange(d, torch::kLong);
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
  void norm(const std::string& hf, const std::string& tandem) {
    add(hf + ".weight", t_(tandem + ".weight").index_select(0, order_));
    add(hf + ".bias", t_(tandem + ".bias").index_select(0, order_));
  }
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

// The transformers class that computes the model: MarianMT for post-norm layers, Pegasus for
// pre-norm ones (its layers normalise before each sublayer and its stacks end with a LayerNorm, as
// Tandem's pre-norm stacks do; its sinusoid table is MarianMT's, stored with the weights).
bool pegasus(const model::TransformerOptions& o) { return o.pre_norm; }

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
  out.add("final_logits_bias", t("output_proj.bias").index_select(0, rows).unsqueeze(0));
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
    if (pegasus(o)) {
      out.norm("model." + std::string(stack) + ".layer_norm", std::string(stack) + ".final_norm");
      out.positions("model." + std::string(stack) + ".embed_positions.weight");
    }
  }
  return out.tensors();
}

ordered_json hf_config(const model::TransformerOptions& o, const HfVocab& v) {
  const auto n = static_cast<int64_t>(v.rows.size());
  ordered_json config = {
      {"architectures", {pegasus(o) ? "PegasusForConditionalGeneration" : "MarianMTModel"}},
      {"model_type", pegasus(o) ? "pegasus" : "marian"},
      {"vocab_size", n}};
  if (!pegasus(o)) config["decoder_vocab_size"] = n;
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
  if (!pegasus(o)) config["share_encoder_decoder_embeddings"] = o.tie_embeddings;
  config.update(ordered_json{{"tie_word_embeddings", o.tie_embeddings},
                             {"is_encoder_decoder", true},
                             {"pad_token_id", v.pad},
                             {"eos_token_id", v.eos},
                             {"decoder_start_token_id", v.start},
                             {"forced_eos_token_id", v.eos},
                             {"dtype", "float32"}});
  return config;
}

// tandem-decode's search as far as generate() has it: beam 4, length penalty 0.6 (fairseq's
// normalisation, as transformers' beam search), at least one token before </s>, never <pad> or
// <s>. Its a · length + b limit has no counterpart: max_length is the positions' table.
ordered_json generation_config(const model::TransformerOptions& o, const HfVocab& v) {
  const decode::DecodeOptions defaults;
  ordered_json banned = ordered_json::array();
  for (const int64_t id : v.banned) banned.push_back({id});
  return {{"decoder_start_token_id", v.start},
          {"eos_token_id", v.eos},
          {"forced_eos_token_id", v.eos},
          {"pad_token_id", v.pad},
          {"bad_words_ids", banned},
          {"num_beams", defaults.beam_size},
          {"length_penalty", defaults.length_penalty},
          {"min_new_tokens", defaults.min_len},
          {"max_length", o.max_positions}};
}

void write_tokenizer(const data::Vocab& vocab, const HfVocab& v, const std::string& dir) {
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

}  // namespace

void check_huggingface(const checkpoint::InferenceModel& model) {
  const config::ModelConfig& m = model.config.model;
  if (model.vocab.coded()) {
    throw std::invalid_argument(
        "the model marks languages with codes (an imported NLLB-200 or M2M-100): transformers "
        "computes it with M2M-100's classes, which tandem-export --to huggingface does not write "
        "yet (it writes MarianMT folders)");
  }
  if (m.positions == config::PositionLayout::kFairseq) {
    throw std::invalid_argument(
        std::string("model.positions: fairseq") +
        (m.pre_norm ? ": M2M-100's classes compute that table, and tandem-export --to "
                      "huggingface does not write them yet"
                    : " with post-norm layers: no transformers class computes that table with "
                      "post-norm layers") +
        "; train with model.positions: interleaved or halves (MarianMT's and Pegasus's table)");
  }
  if (m.pre_norm && !m.tie_embeddings) {
    throw std::invalid_argument(
        "model.tie_embeddings: false with model.pre_norm: true: transformers' pre-norm class "
        "with this model's table (Pegasus) shares one embedding between encoder and decoder; "
        "train with model.tie_embeddings: true, or post-norm layers (MarianMT has untied ones)");
  }
}

void write_hf_folder(const checkpoint::InferenceModel& model, const Provenance& provenance,
                     const std::string& dir) {
  check_huggingface(model);
  const HfVocab vocab = hf_vocab(model.vocab);
  const model::TransformerOptions& o = model.model->options();
  write_safetensors(dir + "/model.safetensors", hf_tensors(model.model, vocab));
  write_text(dir + "/config.json", hf_config(o, vocab).dump(2) + "\n");
  write_text(dir + "/generation_config.json", generation_config(o, vocab).dump(2) + "\n");
  write_tokenizer(model.vocab, vocab, dir);
  write_text(dir + "/tandem.json", provenance_json(provenance).dump(2) + "\n");
}

}  // namespace tandem::exporter
