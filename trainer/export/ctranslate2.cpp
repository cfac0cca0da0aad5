#include "trainer/export/ctranslate2.h"

#include <cfloat>
#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "trainer/common/token_ids.h"
#include "trainer/export/model_tensors.h"

namespace tandem::exporter {
namespace {

constexpr const char* kSpec = "TransformerSpec";
constexpr uint32_t kSpecRevision = 7;
constexpr int64_t kRelu = 0, kSwish = 2;  // CTranslate2's ops::ActivationType

// Adds variables in the stored precision: weights of linear layers and embeddings per
// `quantization`, every other float (biases, LayerNorm, position table) in float32 or float16.
class Variables {
 public:
  Variables(Ct2Model& out, Ct2Quantization quantization) : out_(out), q_(quantization) {}

  // A 0-dim int8 or int16 variable (CTranslate2 stores flags as int8).
  void scalar(const std::string& name, int64_t value, torch::ScalarType type) {
    out_.variables.push_back({name, torch::scalar_tensor(value, torch::dtype(type))});
  }
  void flag(const std::string& name, bool value) { scalar(name, value ? 1 : 0, torch::kInt8); }
  void other(const std::string& name, const torch::Tensor& value) {
    const bool half = q_ == Ct2Quantization::kFloat16 || q_ == Ct2Quantization::kInt8Float16;
    out_.variables.push_back({name, value.to(half ? torch::kHalf : torch::kFloat).contiguous()});
  }
  // `name` (a [rows, columns] matrix) and, in int8, name + "_scale".
  void weight(const std::string& name, const torch::Tensor& value) {
    switch (q_) {
      case Ct2Quantization::kFloat32:
      case Ct2Quantization::kFloat16:
        other(name, value);
        return;
      case Ct2Quantization::kInt8:
      case Ct2Quantization::kInt8Float16:
        quantize_rows(name, value);
        return;
    }
  }
  void linear(const std::string& scope, const torch::Tensor& weight_value,
              const torch::Tensor& bias) {
    weight(scope + "/weight", weight_value);
    other(scope + "/bias", bias);
  }
  void layer_norm(const std::string& scope, const ModelTensors& t, const std::string& name) {
    other(scope + "/gamma", t(name + ".weight"));
    other(scope + "/beta", t(name + ".bias"));
  }
  void alias(const std::string& alias, const std::string& target) {
    out_.aliases.push_back({alias, target});
  }

 private:
  // CTranslate2's own int8 scheme (ModelSpec._quantize): per row, scale = 127 / max |w| (127
  // for an all-zero row), w · scale rounded half to even.
  void quantize_rows(const std::string& name, const torch::Tensor& value) {
    const torch::Tensor w = value.to(torch::kFloat);
    torch::Tensor amax = w.abs().amax(1);
    amax = torch::where(amax.eq(0), torch::full_like(amax, 127.0), amax);
    amax = amax.clamp_min(127.0f / FLT_MAX);  // the scale stays finite for tiny rows
    const torch::Tensor scale = 127.0 / amax;
    out_.variables.push_back({name, (w * scale.unsqueeze(1)).round().to(torch::kInt8)});
    out_.variables.push_back({name + "_scale", scale.contiguous()});
  }

  Ct2Model& out_;
  Ct2Quantization q_;
};

// Self-attention's q, k and v projections as one [3 d, d] layer; cross-attention's q alone and k,
// v as one [2 d, d] layer (CTranslate2 projects the encoder's output once per sentence). Then the
// sublayer's LayerNorm, which CTranslate2 keeps inside the attention's scope.
void attention(Variables& v, const ModelTensors& t, const std::string& scope,
               const std::string& name, bool self) {
  const auto w = [&](const char* proj) { return t(name + "." + proj + ".weight"); };
  const auto b = [&](const char* proj) { return t(name + "." + proj + ".bias"); };
  if (self) {
    v.linear(scope + "/linear_0", torch::cat({w("q_proj"), w("k_proj"), w("v_proj")}),
             torch::cat({b("q_proj"), b("k_proj"), b("v_proj")}));
    v.linear(scope + "/linear_1", w("out_proj"), b("out_proj"));
  } else {
    v.linear(scope + "/linear_0", w("q_proj"), b("q_proj"));
    v.linear(scope + "/linear_1", torch::cat({w("k_proj"), w("v_proj")}),
             torch::cat({b("k_proj"), b("v_proj")}));
    v.linear(scope + "/linear_2", w("out_proj"), b("out_proj"));
  }
  v.layer_norm(scope + "/layer_norm", t, name + "_norm");  // "self_attn" → "self_attn_norm"
}

void feed_forward(Variables& v, const ModelTensors& t, const std::string& scope,
                  const std::string& name) {
  v.linear(scope + "/linear_0", t(name + ".fc1.weight"), t(name + ".fc1.bias"));
  v.linear(scope + "/linear_1", t(name + ".fc2.weight"), t(name + ".fc2.bias"));
  v.layer_norm(scope + "/layer_norm", t, name + "_norm");
}

// An encoder or decoder stack: what TransformerEncoderSpec and TransformerDecoderSpec declare as
// scalars (as their Python specs set them for this architecture), its layers (the decoder's with
// cross-attention) and, in pre-norm, the final LayerNorm.
void stack(Variables& v, const ModelTensors& t, const std::string& scope, int64_t layers,
           const model::TransformerOptions& o) {
  const bool decoder = scope == "decoder";
  v.scalar(scope + "/num_heads", o.heads, torch::kInt16);
  v.flag(scope + "/pre_norm", o.pre_norm);
  v.scalar(scope + "/activation", o.activation == model::Activation::kSwish ? kSwish : kRelu,
           torch::kInt8);
  v.flag(scope + "/scale_embeddings", true);
  for (int64_t i = 0; i < layers; ++i) {
    const std::string layer = scope + "/layer_" + std::to_string(i);
    const std::string name = scope + ".layers." + std::to_string(i);
    attention(v, t, layer + "/self_attention", name + ".self_attn", true);
    if (decoder) attention(v, t, layer + "/attention", name + ".cross_attn", false);
    feed_forward(v, t, layer + "/ffn", name + ".ffn");
  }
  if (o.pre_norm) v.layer_norm(scope + "/layer_norm", t, scope + ".final_norm");
}

void encoder(Variables& v, const ModelTensors& t, const model::TransformerOptions& o) {
  stack(v, t, "encoder", o.encoder_layers, o);
  v.scalar("encoder/embeddings_merge", 0, torch::kInt8);  // concat (of one embedding)
  v.flag("encoder/multi_query_attention", false);
}

// The alignment heads are CTranslate2's alignment_layer (0-based) and alignment_heads (its first
// ones): the attention return_attention gives is theirs.
void decoder(Variables& v, const ModelTensors& t, const model::TransformerOptions& o,
             const model::AlignmentHeads& alignment) {
  stack(v, t, "decoder", o.decoder_layers, o);
  v.scalar("decoder/alignment_layer", alignment.layer, torch::kInt16);
  v.scalar("decoder/alignment_heads", alignment.heads, torch::kInt16);
  for (const char* flag : {"alibi", "alibi_use_positive_positions", "scale_alibi",
                           "start_from_zero_embedding"}) {
    v.flag(std::string("decoder/") + flag, false);
  }
}

// Embeddings, the output layer and the position table: tied weights stored once under the name
// CTranslate2's converter keeps (the first in name order) and aliased under the others.
void embeddings_and_output(Variables& v, const ModelTensors& t,
                           const model::TransformerOptions& o) {
  v.other("decoder/position_encodings/encodings", t("positions"));
  v.alias("encoder/position_encodings/encodings", "decoder/position_encodings/encodings");
  v.other("decoder/projection/bias", t("output_proj.bias"));
  if (o.tie_embeddings) {
    v.weight("decoder/embeddings/weight", t("src_embed.weight"));
    v.alias("decoder/projection/weight", "decoder/embeddings/weight");
    v.alias("encoder/embeddings_0/weight", "decoder/embeddings/weight");
  } else {
    v.weight("encoder/embeddings_0/weight", t("src_embed.weight"));
    v.weight("decoder/embeddings/weight", t("tgt_embed.weight"));
    v.weight("decoder/projection/weight", t("output_proj.weight"));
  }
}

// config.json: the special tokens by their pieces, the source's EOS added by CTranslate2 itself
// (Tandem ends every source with it), Tandem's LayerNorm epsilon (CTranslate2's default is 1e-6).
nlohmann::json ct2_config(const data::Vocab& vocab) {
  return {{"add_source_bos", false},
          {"add_source_eos", true},
          {"bos_token", vocab.piece(kBosId)},
          {"decoder_start_token", vocab.piece(kBosId)},
          {"eos_token", vocab.piece(kEosId)},
          {"unk_token", vocab.piece(kUnkId)},
          {"layer_norm_epsilon", 1e-5},
          {"multi_query_attention", false}};
}

}  // namespace

const std::vector<std::string>& ct2_quantization_names() {
  static const std::vector<std::string> names{"float32", "int8", "int8_float16", "float16"};
  return names;
}

Ct2Quantization ct2_quantization(const std::string& name) {
  const auto& names = ct2_quantization_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return static_cast<Ct2Quantization>(i);
  }
  throw std::invalid_argument("quantization '" + name +
                              "': expected float32, int8, int8_float16 or float16");
}

Ct2Model ct2_transformer(const model::Transformer& model, Ct2Quantization quantization,
                         const model::AlignmentHeads& alignment) {
  torch::NoGradGuard no_grad;
  const ModelTensors tensors(model);
  const model::TransformerOptions& options = model->options();
  model::check_alignment_heads(alignment, options.decoder_layers, options.heads);
  Ct2Model out{kSpec, kSpecRevision, {}, {}};
  Variables variables(out, quantization);
  embeddings_and_output(variables, tensors, options);
  encoder(variables, tensors, options);
  decoder(variables, tensors, options, alignment);
  return out;
}

void write_ct2_folder(const checkpoint::InferenceModel& model, Ct2Quantization quantization,
                      const Provenance& provenance, const std::string& dir) {
  const config::AlignmentConfig& trained = model.config.train.alignment;
  const model::AlignmentHeads alignment{
      model::bottom_up_layer(trained.layer, model.config.model.decoder_layers),
      trained.heads_read(model.config.model.heads)};
  write_ct2_model(dir + "/model.bin", ct2_transformer(model.model, quantization, alignment));
  write_text(dir + "/config.json", ct2_config(model.vocab).dump(2) + "\n");
  nlohmann::json pieces = nlohmann::json::array();
  for (int32_t id = 0; id < model.vocab.size(); ++id) pieces.push_back(model.vocab.piece(id));
  write_text(dir + "/shared_vocabulary.json", pieces.dump(2) + "\n");
  // One id table for both sides either way; a paired vocabulary's two SentencePiece models under
  // MarianMT's names.
  if (model.vocab.paired()) {
    write_text(dir + "/source.spm", model.vocab.sentencepiece_bytes(data::Side::kSource));
    write_text(dir + "/target.spm", model.vocab.sentencepiece_bytes(data::Side::kTarget));
  } else {
    write_text(dir + "/sentencepiece.model", model.vocab.sentencepiece_bytes(data::Side::kSource));
  }
  nlohmann::json info = provenance_json(provenance);
  info["quantization"] = ct2_quantization_names().at(static_cast<size_t>(quantization));
  // A model trained to align each piece where it is the decoder's input: return_attention's row
  // for a token is then the next one's (the end token's for the last: return_end_token).
  if (trained.shift_read()) info["alignment_shift"] = true;
  if (model.vocab.coded()) {
    // A model with language codes (NLLB-200, M2M-100): each source starts with its language's
    // piece and translate_batch's target_prefix is the target's; detokenization leaves these
    // pieces out, as tandem-decode does.
    for (const auto& code : model.vocab.language_codes()) {
      info["language_codes"][code.language] = model.vocab.piece(code.id);
    }
    info["special_pieces"] = nlohmann::json::array();
    for (int32_t id = kEosId + 1; id < model.vocab.size(); ++id) {
      if (model.vocab.special(id)) info["special_pieces"].push_back(model.vocab.piece(id));
    }
  }
  write_text(dir + "/tandem.json", info.dump(2) + "\n");
}

void write_ct2_vmap(const data::Shortlist& shortlist, const data::Vocab& vocab,
                    const std::string& path) {
  if (!shortlist.built_on(vocab)) {
    throw std::invalid_argument("the shortlist was built on another vocabulary than the model's");
  }
  auto pieces = [&](const std::vector<int32_t>& ids) {
    std::string out;
    for (const int32_t id : ids) out += (out.empty() ? "" : " ") + vocab.piece(id);
    return out;
  };
  std::string text = "\t" + pieces(shortlist.frequent()) + "\n";
  for (int32_t source = 0; source < shortlist.vocab_size(); ++source) {
    const auto targets = shortlist.targets_of(source);
    if (!targets.empty()) text += vocab.piece(source) + "\t" + pieces(targets) + "\n";
  }
  write_text(path, text);
}

}  // namespace tandem::exporter
