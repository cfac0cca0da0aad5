#include "trainer/export/ctranslate2.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

namespace tandem::exporter {
namespace {

// The names CTranslate2 4.8.5's own TransformerSpec.from_config((2, 1), num_heads=2,
// pre_norm=False) requires (spec.variables(), printed by its Python package): the layout the
// export must reproduce. Biases and position tables are optional there and come on top.
const std::set<std::string> kRequiredPostNorm2x1 = {
    "decoder/activation", "decoder/alibi", "decoder/alibi_use_positive_positions",
    "decoder/alignment_heads", "decoder/alignment_layer", "decoder/embeddings/weight",
    "decoder/layer_0/attention/layer_norm/beta", "decoder/layer_0/attention/layer_norm/gamma",
    "decoder/layer_0/attention/linear_0/weight", "decoder/layer_0/attention/linear_1/weight",
    "decoder/layer_0/attention/linear_2/weight", "decoder/layer_0/ffn/layer_norm/beta",
    "decoder/layer_0/ffn/layer_norm/gamma", "decoder/layer_0/ffn/linear_0/weight",
    "decoder/layer_0/ffn/linear_1/weight", "decoder/layer_0/self_attention/layer_norm/beta",
    "decoder/layer_0/self_attention/layer_norm/gamma",
    "decoder/layer_0/self_attention/linear_0/weight",
    "decoder/layer_0/self_attention/linear_1/weight", "decoder/num_heads", "decoder/pre_norm",
    "decoder/projection/weight", "decoder/scale_alibi", "decoder/scale_embeddings",
    "decoder/start_from_zero_embedding", "encoder/activation", "encoder/embeddings_0/weight",
    "encoder/embeddings_merge", "encoder/layer_0/ffn/layer_norm/beta",
    "encoder/layer_0/ffn/layer_norm/gamma", "encoder/layer_0/ffn/linear_0/weight",
    "encoder/layer_0/ffn/linear_1/weight", "encoder/layer_0/self_attention/layer_norm/beta",
    "encoder/layer_0/self_attention/layer_norm/gamma",
    "encoder/layer_0/self_attention/linear_0/weight",
    "encoder/layer_0/self_attention/linear_1/weight", "encoder/layer_1/ffn/layer_norm/beta",
    "encoder/layer_1/ffn/layer_norm/gamma", "encoder/layer_1/ffn/linear_0/weight",
    "encoder/layer_1/ffn/linear_1/weight", "encoder/layer_1/self_attention/layer_norm/beta",
    "encoder/layer_1/self_attention/layer_norm/gamma",
    "encoder/layer_1/self_attention/linear_0/weight",
    "encoder/layer_1/self_attention/linear_1/weight", "encoder/multi_query_attention",
    "encoder/num_heads", "encoder/pre_norm", "encoder/scale_embeddings"};

model::Transformer tiny_model(bool tied, bool pre_norm, int64_t encoder_layers = 2,
                              int64_t decoder_layers = 1,
                              model::Activation activation = model::Activation::kRelu,
                              model::PositionLayout positions =
                                  model::PositionLayout::kInterleaved) {
  torch::manual_seed(7);
  model::TransformerOptions o;
  o.vocab_size = 11;
  o.d_model = 8;
  o.heads = 2;
  o.encoder_layers = encoder_layers;
  o.decoder_layers = decoder_layers;
  o.d_ff = 16;
  o.dropout = 0;
  o.pre_norm = pre_norm;
  o.tie_embeddings = tied;
  o.max_positions = 20;
  o.activation = activation;
  o.positions = positions;
  model::Transformer m(o);
  // Non-zero biases and LayerNorm parameters, so that a bias put in the wrong place shows.
  torch::NoGradGuard no_grad;
  for (auto& p : m->parameters()) p.uniform_(-1, 1);
  return m;
}

struct Exported {
  std::map<std::string, torch::Tensor> variables;
  std::map<std::string, std::string> aliases;
  std::set<std::string> names() const {
    std::set<std::string> out;
    for (const auto& [name, value] : variables) out.insert(name);
    for (const auto& [name, target] : aliases) out.insert(name);
    return out;
  }
};

Exported exported(const model::Transformer& m, Ct2Quantization q = Ct2Quantization::kFloat32,
                  const model::AlignmentHeads& alignment = {0, 1}) {
  const Ct2Model out = ct2_transformer(m, q, alignment);
  EXPECT_EQ(out.spec, "TransformerSpec");
  EXPECT_EQ(out.revision, 7u);
  Exported e;
  for (const auto& v : out.variables) EXPECT_TRUE(e.variables.emplace(v.name, v.value).second) << v.name;
  for (const auto& a : out.aliases) e.aliases[a.alias] = a.target;
  return e;
}

torch::Tensor param(const model::Transformer& m, const std::string& name) {
  return m->named_parameters()[name];
}

TEST(Ct2Transformer, HasTheLayoutOfCTranslate2sOwnSpecPlusBiasesAndPositions) {
  const Exported e = exported(tiny_model(/*tied=*/true, /*pre_norm=*/false));
  std::set<std::string> expected = kRequiredPostNorm2x1;
  for (const auto& name : kRequiredPostNorm2x1) {
    const auto at = name.find("/linear_");
    if (at != std::string::npos) expected.insert(name.substr(0, name.rfind('/')) + "/bias");
  }
  expected.insert({"decoder/projection/bias", "encoder/position_encodings/encodings",
                   "decoder/position_encodings/encodings"});
  EXPECT_EQ(e.names(), expected);
  // Tied: one matrix, and the names CTranslate2's converter aliases to it.
  EXPECT_EQ(e.aliases.at("decoder/projection/weight"), "decoder/embeddings/weight");
  EXPECT_EQ(e.aliases.at("encoder/embeddings_0/weight"), "decoder/embeddings/weight");
  EXPECT_EQ(e.aliases.at("encoder/position_encodings/encodings"),
            "decoder/position_encodings/encodings");
}

TEST(Ct2Transformer, ScalarsSayPostNormReluScaledEmbeddingsAndTheHeads) {
  const Exported e = exported(tiny_model(true, false));
  for (const std::string stack : {"encoder", "decoder"}) {
    EXPECT_EQ(e.variables.at(stack + "/num_heads").scalar_type(), torch::kInt16);
    EXPECT_EQ(e.variables.at(stack + "/num_heads").item<int64_t>(), 2);
    EXPECT_EQ(e.variables.at(stack + "/pre_norm").scalar_type(), torch::kInt8);
    EXPECT_EQ(e.variables.at(stack + "/pre_norm").item<int64_t>(), 0);
    EXPECT_EQ(e.variables.at(stack + "/activation").item<int64_t>(), 0);  // relu
    EXPECT_EQ(e.variables.at(stack + "/scale_embeddings").item<int64_t>(), 1);
  }
  EXPECT_EQ(e.variables.at("decoder/alignment_layer").item<int64_t>(), 0);
  EXPECT_EQ(e.variables.at("decoder/alignment_heads").item<int64_t>(), 1);
}

// CTranslate2's return_attention averages the first alignment_heads heads of alignment_layer:
// the heads guided alignment trained.
TEST(Ct2Transformer, AlignmentLayerAndHeadsAreTheModelsAlignmentHeads) {
  const Exported e = exported(tiny_model(true, false, 2, 2), Ct2Quantization::kFloat32, {1, 2});
  EXPECT_EQ(e.variables.at("decoder/alignment_layer").scalar_type(), torch::kInt16);
  EXPECT_EQ(e.variables.at("decoder/alignment_layer").item<int64_t>(), 1);
  EXPECT_EQ(e.variables.at("decoder/alignment_heads").scalar_type(), torch::kInt16);
  EXPECT_EQ(e.variables.at("decoder/alignment_heads").item<int64_t>(), 2);
  EXPECT_THROW(exported(tiny_model(true, false, 2, 2), Ct2Quantization::kFloat32, {2, 1}),
               std::invalid_argument);
}

TEST(Ct2Transformer, FusesSelfAttentionsQkvAndCrossAttentionsKv) {
  const auto m = tiny_model(true, false);
  const Exported e = exported(m);
  const auto w = [&](const std::string& name) { return param(m, name); };
  const std::string enc = "encoder.layers.1.self_attn.";
  EXPECT_TRUE(torch::equal(
      e.variables.at("encoder/layer_1/self_attention/linear_0/weight"),
      torch::cat({w(enc + "q_proj.weight"), w(enc + "k_proj.weight"), w(enc + "v_proj.weight")})));
  EXPECT_TRUE(torch::equal(
      e.variables.at("encoder/layer_1/self_attention/linear_0/bias"),
      torch::cat({w(enc + "q_proj.bias"), w(enc + "k_proj.bias"), w(enc + "v_proj.bias")})));
  EXPECT_TRUE(torch::equal(e.variables.at("encoder/layer_1/self_attention/linear_1/weight"),
                           w(enc + "out_proj.weight")));
  const std::string cross = "decoder.layers.0.cross_attn.";
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/layer_0/attention/linear_0/weight"),
                           w(cross + "q_proj.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/layer_0/attention/linear_1/bias"),
                           torch::cat({w(cross + "k_proj.bias"), w(cross + "v_proj.bias")})));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/layer_0/attention/layer_norm/gamma"),
                           w("decoder.layers.0.cross_attn_norm.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/layer_0/ffn/linear_1/weight"),
                           w("decoder.layers.0.ffn.fc2.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/embeddings/weight"), w("src_embed.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/projection/bias"), w("output_proj.bias")));
  // Tandem's table (sin on even columns, cos on odd), not CTranslate2's built-in layout.
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/position_encodings/encodings"),
                           model::sinusoidal_positions(20, 8)));
}

TEST(Ct2Transformer, UntiedEmbeddingsAndOutputAreThreeMatrices) {
  const auto m = tiny_model(/*tied=*/false, false);
  const Exported e = exported(m);
  EXPECT_EQ(e.aliases.count("decoder/projection/weight"), 0u);
  EXPECT_TRUE(torch::equal(e.variables.at("encoder/embeddings_0/weight"), param(m, "src_embed.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/embeddings/weight"), param(m, "tgt_embed.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/projection/weight"), param(m, "output_proj.weight")));
}

// Marian's options: CTranslate2's activation enum says SWISH (2) for both stacks, and the position
// table, sin in the first half of the columns and cos in the second, goes in as it is.
TEST(Ct2Transformer, SwishAndHalvesPositionsAreMariansActivationAndTable) {
  const auto m = tiny_model(true, false, 2, 1, model::Activation::kSwish,
                            model::PositionLayout::kHalves);
  const Exported e = exported(m);
  EXPECT_EQ(e.variables.at("encoder/activation").item<int64_t>(), 2);
  EXPECT_EQ(e.variables.at("decoder/activation").item<int64_t>(), 2);
  const auto relu = exported(tiny_model(true, false));
  EXPECT_EQ(relu.variables.at("decoder/activation").item<int64_t>(), 0);
  const auto table = e.variables.at("decoder/position_encodings/encodings");
  ASSERT_EQ(table.sizes(), torch::IntArrayRef({20, 8}));
  for (int64_t p = 0; p < 20; ++p) {
    for (int64_t i = 0; i < 4; ++i) {
      const double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * i / 8);
      EXPECT_NEAR(table[p][i].item<double>(), std::sin(angle), 1e-6) << p << " " << i;
      EXPECT_NEAR(table[p][4 + i].item<double>(), std::cos(angle), 1e-6) << p << " " << i;
    }
  }
}

TEST(Ct2Transformer, PreNormBringsTheFinalNorms) {
  const auto m = tiny_model(true, /*pre_norm=*/true, 1, 2);
  const Exported e = exported(m);
  EXPECT_EQ(e.variables.at("encoder/pre_norm").item<int64_t>(), 1);
  EXPECT_EQ(e.variables.at("decoder/pre_norm").item<int64_t>(), 1);
  EXPECT_TRUE(torch::equal(e.variables.at("encoder/layer_norm/gamma"), param(m, "encoder.final_norm.weight")));
  EXPECT_TRUE(torch::equal(e.variables.at("decoder/layer_norm/beta"), param(m, "decoder.final_norm.bias")));
  EXPECT_TRUE(e.variables.count("decoder/layer_1/attention/linear_2/weight"));
  EXPECT_FALSE(exported(tiny_model(true, false)).variables.count("encoder/layer_norm/gamma"));
}

// CTranslate2's scheme, as a loop: per row scale = 127 / max |w|, q = w * scale rounded to
// nearest, ties to even.
TEST(Ct2Transformer, Int8IsCTranslate2sPerRowSchemeAndTheRestStaysFloat32) {
  const auto m = tiny_model(true, false);
  const Exported e = exported(m, Ct2Quantization::kInt8);
  const torch::Tensor w = param(m, "encoder.layers.0.ffn.fc1.weight");
  const torch::Tensor q = e.variables.at("encoder/layer_0/ffn/linear_0/weight");
  const torch::Tensor scale = e.variables.at("encoder/layer_0/ffn/linear_0/weight_scale");
  ASSERT_EQ(q.scalar_type(), torch::kInt8);
  ASSERT_EQ(scale.scalar_type(), torch::kFloat);
  ASSERT_EQ(scale.size(0), w.size(0));
  for (int64_t row = 0; row < w.size(0); ++row) {
    float amax = 0;
    for (int64_t col = 0; col < w.size(1); ++col) {
      amax = std::max(amax, std::abs(w[row][col].item<float>()));
    }
    const float s = 127.0f / amax;
    EXPECT_FLOAT_EQ(scale[row].item<float>(), s) << row;
    for (int64_t col = 0; col < w.size(1); ++col) {
      EXPECT_EQ(q[row][col].item<int64_t>(),
                static_cast<int64_t>(std::nearbyint(w[row][col].item<float>() * s)))
          << row << ", " << col;
    }
  }
  // The tied matrix is quantized once; the loader aliases its scale with it.
  EXPECT_TRUE(e.variables.count("decoder/embeddings/weight_scale"));
  EXPECT_FALSE(e.variables.count("decoder/projection/weight_scale"));
  EXPECT_EQ(e.variables.at("decoder/layer_0/ffn/linear_0/bias").scalar_type(), torch::kFloat);
  EXPECT_EQ(e.variables.at("decoder/position_encodings/encodings").scalar_type(), torch::kFloat);
}

TEST(Ct2Transformer, Float16ModesStoreTheOtherFloatsInHalf) {
  const auto m = tiny_model(true, false);
  const Exported mixed = exported(m, Ct2Quantization::kInt8Float16);
  EXPECT_EQ(mixed.variables.at("encoder/layer_0/ffn/linear_0/weight").scalar_type(), torch::kInt8);
  EXPECT_EQ(mixed.variables.at("encoder/layer_0/ffn/linear_0/bias").scalar_type(), torch::kHalf);
  EXPECT_EQ(mixed.variables.at("encoder/layer_0/ffn/linear_0/weight_scale").scalar_type(),
            torch::kFloat);
  const Exported half = exported(m, Ct2Quantization::kFloat16);
  const torch::Tensor w = half.variables.at("encoder/layer_0/ffn/linear_0/weight");
  EXPECT_EQ(w.scalar_type(), torch::kHalf);
  EXPECT_FALSE(half.variables.count("encoder/layer_0/ffn/linear_0/weight_scale"));
  EXPECT_TRUE(torch::equal(w, param(m, "encoder.layers.0.ffn.fc1.weight").to(torch::kHalf)));
  EXPECT_EQ(half.variables.at("encoder/num_heads").scalar_type(), torch::kInt16);
}

TEST(Ct2Quantization, NamesRoundTripAndAnUnknownOneIsRefused) {
  for (const auto& name : ct2_quantization_names()) {
    EXPECT_EQ(ct2_quantization_names().at(static_cast<size_t>(ct2_quantization(name))), name);
  }
  EXPECT_THROW(ct2_quantization("int4"), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::exporter
