// Tests of the Transformer: names and counts of parameters, initialisation, the sinusoidal table,
// an independent per-sentence forward pass, masks (causal, padding), incremental decoding, and a
// short training run that must learn to copy.
#include "trainer/model/transformer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tandem::model {
namespace {

using torch::indexing::None;
using torch::indexing::Slice;

constexpr int64_t kVocab = 20;
constexpr int64_t kFirstWord = 4;  // ids below are pad, unk, bos, eos

TransformerOptions tiny_options(bool pre_norm = false, bool tie = false) {
  TransformerOptions o;
  o.vocab_size = kVocab;
  o.d_model = 16;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 32;
  o.dropout = 0.0;
  o.pre_norm = pre_norm;
  o.tie_embeddings = tie;
  o.max_positions = 64;
  return o;
}

Transformer tiny_model(bool pre_norm = false, bool tie = false, uint64_t seed = 7) {
  torch::manual_seed(seed);
  Transformer model(tiny_options(pre_norm, tie));
  model->eval();
  return model;
}

// MarianMT's shape: post-norm, tied, swish, positions in halves.
Transformer marian_model(uint64_t seed = 7) {
  torch::manual_seed(seed);
  auto o = tiny_options(false, true);
  o.activation = Activation::kSwish;
  o.positions = PositionLayout::kHalves;
  Transformer model(o);
  model->eval();
  return model;
}

torch::Tensor words(int64_t len) { return torch::randint(kFirstWord, kVocab, {len}, torch::kLong); }

// Rows of different lengths → [rows, longest] right-padded with kPadId.
torch::Tensor pad_rows(const std::vector<torch::Tensor>& rows) {
  int64_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, r.size(0));
  auto out = torch::full({static_cast<int64_t>(rows.size()), longest}, kPadId, torch::kLong);
  for (size_t i = 0; i < rows.size(); ++i) out[i].slice(0, 0, rows[i].size(0)).copy_(rows[i]);
  return out;
}

std::map<std::string, torch::Tensor> params_by_name(const Transformer& model) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value();
  return out;
}

std::vector<std::string> param_names(const Transformer& model) {
  std::vector<std::string> names;
  for (const auto& item : model->named_parameters()) names.push_back(item.key());
  std::sort(names.begin(), names.end());
  return names;
}

std::vector<std::string> expected_names(int64_t enc, int64_t dec, bool pre_norm, bool tie) {
  std::vector<std::string> names = {"src_embed.weight", "output_proj.bias"};
  if (!tie) names.insert(names.end(), {"tgt_embed.weight", "output_proj.weight"});
  auto add_module = [&](const std::string& prefix, const std::vector<std::string>& subs) {
    for (const auto& s : subs) {
      names.push_back(prefix + s + ".weight");
      names.push_back(prefix + s + ".bias");
    }
  };
  const std::vector<std::string> attn = {"q_proj", "k_proj", "v_proj", "out_proj"};
  for (int64_t i = 0; i < enc; ++i) {
    auto p = "encoder.layers." + std::to_string(i) + ".";
    add_module(p + "self_attn.", attn);
    add_module(p, {"self_attn_norm", "ffn.fc1", "ffn.fc2", "ffn_norm"});
  }
  for (int64_t i = 0; i < dec; ++i) {
    auto p = "decoder.layers." + std::to_string(i) + ".";
    add_module(p + "self_attn.", attn);
    add_module(p + "cross_attn.", attn);
    add_module(p, {"self_attn_norm", "cross_attn_norm", "ffn.fc1", "ffn.fc2", "ffn_norm"});
  }
  if (pre_norm) add_module("", {"encoder.final_norm", "decoder.final_norm"});
  std::sort(names.begin(), names.end());
  return names;
}

TEST(Transformer, ParameterNamesAreTheCheckpointPaths) {
  for (bool pre_norm : {false, true}) {
    for (bool tie : {false, true}) {
      auto model = tiny_model(pre_norm, tie);
      EXPECT_EQ(param_names(model), expected_names(2, 2, pre_norm, tie))
          << "pre_norm=" << pre_norm << " tie=" << tie;
    }
  }
}

TEST(Transformer, ParameterCountMatchesHandFormula) {
  const int64_t v = kVocab, d = 16, f = 32;
  const int64_t attn = 4 * (d * d + d), norm = 2 * d, ffn = d * f + f + f * d + d;
  const int64_t enc_layer = attn + ffn + 2 * norm, dec_layer = 2 * attn + ffn + 3 * norm;
  for (bool pre_norm : {false, true}) {
    for (bool tie : {false, true}) {
      auto model = tiny_model(pre_norm, tie);
      int64_t expected = 2 * enc_layer + 2 * dec_layer + (tie ? v * d + v : 3 * v * d + v) +
                         (pre_norm ? 2 * norm : 0);
      int64_t count = 0;
      std::set<const void*> storages;
      for (const auto& p : model->parameters()) {
        count += p.numel();
        EXPECT_TRUE(storages.insert(p.data_ptr()).second) << "a tensor is listed twice";
      }
      EXPECT_EQ(count, expected) << "pre_norm=" << pre_norm << " tie=" << tie;
    }
  }
}

// A model built a part at a time (the import's and, for a large model, any caller's way): the hook
// sees each part once, in building order, and hollowed parts keep names and shapes, not memory.
TEST(Transformer, EachPartIsHandedOverAsItIsBuiltAndHollowedPartsKeepOnlyTheirShapes) {
  for (const bool pre_norm : {false, true}) {
    for (const bool tie : {false, true}) {
      const auto whole = tiny_model(pre_norm, tie);
      auto options = tiny_options(pre_norm, tie);
      std::vector<int64_t> part_sizes;  // parameters of each part, as it was handed over
      options.on_part_built = [&](torch::nn::Module& part) {
        int64_t count = 0;
        for (const auto& p : part.parameters()) count += p.numel();
        part_sizes.push_back(count);
        hollow_parameters(part);
      };
      const Transformer parts(options);
      const int64_t d = 16, ff = 32,
                    enc_layer = 4 * (d * d + d) + 2 * 2 * d + d * ff + ff + ff * d + d;
      const int64_t dec_layer = enc_layer + 4 * (d * d + d) + 2 * d;
      std::vector<int64_t> expected = {kVocab * d};
      if (!tie) expected.push_back(kVocab * d);
      for (int i = 0; i < 2; ++i) expected.push_back(enc_layer);
      if (pre_norm) expected.push_back(2 * d);
      for (int i = 0; i < 2; ++i) expected.push_back(dec_layer);
      if (pre_norm) expected.push_back(2 * d);
      expected.push_back(tie ? kVocab : kVocab * d + kVocab);
      EXPECT_EQ(part_sizes, expected) << "pre_norm " << pre_norm << " tie " << tie;
      const auto built = parts->named_parameters();
      ASSERT_EQ(built.size(), whole->named_parameters().size());
      for (const auto& item : whole->named_parameters()) {
        const torch::Tensor* hollow = built.find(item.key());
        ASSERT_NE(hollow, nullptr) << item.key();
        EXPECT_EQ(hollow->sizes(), item.value().sizes()) << item.key();
        EXPECT_EQ(hollow->storage().nbytes(), sizeof(float)) << item.key();
      }
    }
  }
}

TEST(Transformer, SameSeedGivesSameParameters) {
  auto a = params_by_name(tiny_model(false, false, 5));
  auto b = params_by_name(tiny_model(false, false, 5));
  auto c = params_by_name(tiny_model(false, false, 6));
  for (const auto& [name, p] : a) {
    EXPECT_TRUE(torch::equal(p, b[name])) << name;
  }
  EXPECT_FALSE(torch::equal(a["src_embed.weight"], c["src_embed.weight"]));
}

TEST(Transformer, PositionsAreABufferNotAParameter) {
  auto model = tiny_model();
  auto buffers = model->named_buffers();
  ASSERT_TRUE(buffers.contains("positions"));
  EXPECT_EQ(buffers["positions"].sizes(), torch::IntArrayRef({64, 16}));
  for (const auto& name : param_names(model)) EXPECT_EQ(name.find("positions"), std::string::npos);
}

TEST(Transformer, InitialisationFollowsTheRecipe) {
  torch::manual_seed(3);
  auto options = tiny_options();
  options.vocab_size = 2000;  // enough embedding entries for a stable standard deviation
  Transformer model(options);
  auto params = params_by_name(model);
  EXPECT_NEAR(params["src_embed.weight"].std().item<double>(), 0.25, 0.01);  // 16^-0.5
  EXPECT_NEAR(params["tgt_embed.weight"].std().item<double>(), 0.25, 0.01);
  for (const auto& [name, p] : params) {
    bool linear_weight = p.dim() == 2 && name.find("embed") == std::string::npos;
    if (linear_weight) {  // Xavier-uniform: U(-b, b), b = sqrt(6 / (fan_in + fan_out))
      double bound = std::sqrt(6.0 / static_cast<double>(p.size(0) + p.size(1)));
      EXPECT_LE(p.abs().max().item<double>(), bound) << name;
      EXPECT_GT(p.abs().max().item<double>(), 0.9 * bound) << name;
    } else if (name.find("norm") == std::string::npos && name.find(".bias") != std::string::npos) {
      EXPECT_EQ(p.abs().max().item<double>(), 0.0) << name;
    }
  }
}

// Marian's layout: the sines of the ceil(d/2) angles, then the cosines of the first floor(d/2).
TEST(Transformer, HalvesPositionsPutSinesFirstAndCosinesSecond) {
  for (int64_t d : {8, 7}) {
    const auto pe = sinusoidal_positions(50, d, PositionLayout::kHalves);
    const auto interleaved = sinusoidal_positions(50, d);
    ASSERT_EQ(pe.sizes(), torch::IntArrayRef({50, d}));
    const int64_t sines = (d + 1) / 2;
    for (int64_t p = 0; p < 50; ++p) {
      for (int64_t j = 0; j < d; ++j) {
        const int64_t i = j < sines ? j : j - sines;
        double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * i / d);
        double expected = j < sines ? std::sin(angle) : std::cos(angle);
        EXPECT_NEAR(pe[p][j].item<double>(), expected, 1e-6) << "p=" << p << " j=" << j;
        // The same numbers as the interleaved table's, moved: column 2i there is column i here.
        const int64_t there = j < sines ? 2 * i : 2 * i + 1;
        EXPECT_EQ(pe[p][j].item<float>(), interleaved[p][there].item<float>());
      }
    }
  }
}

TEST(Transformer, SinusoidalPositionsEqualClosedForm) {
  for (int64_t d : {8, 7}) {
    auto pe = sinusoidal_positions(50, d);
    ASSERT_EQ(pe.sizes(), torch::IntArrayRef({50, d}));
    auto a = pe.accessor<float, 2>();
    for (int64_t p = 0; p < 50; ++p) {
      for (int64_t j = 0; j < d; ++j) {
        int64_t two_i = j - j % 2;
        double angle = static_cast<double>(p) / std::pow(10000.0, static_cast<double>(two_i) / d);
        double expected = j % 2 == 0 ? std::sin(angle) : std::cos(angle);
        EXPECT_NEAR(a[p][j], expected, 1e-6) << "p=" << p << " j=" << j << " d=" << d;
      }
    }
  }
}

// fairseq's table (M2M-100, NLLB-200): row p holds position p + 2 (after padding index 1), the
// sines of (p + 2) / 10000^(i/(h-1)) in the first h = floor(d/2) columns and the cosines in the
// next h, zeros in a last column when d is odd. float32 arithmetic, as fairseq's, rounds the
// angles of far positions: within 1e-6 of the closed form up to position 50, 1e-4 up to 1,026.
TEST(Transformer, FairseqPositionsStartAfterThePaddingIndexWithTheirOwnFrequencies) {
  for (int64_t d : {8, 7}) {
    const int64_t rows = 1024;
    const auto pe = sinusoidal_positions(rows, d, PositionLayout::kFairseq);
    ASSERT_EQ(pe.sizes(), torch::IntArrayRef({rows, d}));
    const auto a = pe.accessor<float, 2>();
    const int64_t h = d / 2;
    for (int64_t p = 0; p < rows; ++p) {
      for (int64_t j = 0; j < d; ++j) {
        const int64_t i = j < h ? j : j - h;
        const double angle = static_cast<double>(p + 2) / std::pow(10000.0, double(i) / (h - 1));
        const double expected = j >= 2 * h ? 0.0 : j < h ? std::sin(angle) : std::cos(angle);
        EXPECT_NEAR(a[p][j], expected, p < 50 ? 1e-6 : 1e-4) << "p=" << p << " j=" << j;
      }
    }
  }
  // Not Marian's halves: other frequencies, and rows two positions on.
  EXPECT_FALSE(torch::allclose(sinusoidal_positions(8, 8, PositionLayout::kFairseq),
                               sinusoidal_positions(8, 8, PositionLayout::kHalves)));
  TransformerOptions o;
  o.d_model = 2;
  o.heads = 1;
  o.positions = PositionLayout::kFairseq;
  EXPECT_THROW(Transformer{o}, std::invalid_argument);
}

// An independent forward pass for one unpadded sentence, written from the paper with explicit
// per-head, per-query loops and read straight from the parameters by name (double precision).
class ReferenceTransformer {
 public:
  ReferenceTransformer(const Transformer& model) : o_(model->options()), p_(params_by_name(model)) {
    // The table from its definition: the angle p / 10000^(2i/d) of column pair i, its sin and cos
    // side by side (interleaved) or in the two halves (Marian's).
    const int64_t d = o_.d_model, sines = (d + 1) / 2;
    pe_ = torch::zeros({o_.max_positions, d}, torch::kDouble);
    for (int64_t p = 0; p < o_.max_positions; ++p) {
      for (int64_t i = 0; 2 * i < d; ++i) {
        const double angle = static_cast<double>(p) / std::pow(10000.0, 2.0 * i / d);
        const bool halves = o_.positions == PositionLayout::kHalves;
        pe_[p][halves ? i : 2 * i] = std::sin(angle);
        if (2 * i + 1 < d) pe_[p][halves ? sines + i : 2 * i + 1] = std::cos(angle);
      }
    }
    pe_ = pe_.to(torch::kFloat).to(torch::kDouble);  // the model's table is float32
  }

  // src [S], tgt [T] → logits [T, vocab].
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt) {
    auto x = embed(src, "src_embed.weight");
    for (int64_t i = 0; i < o_.encoder_layers; ++i) {
      auto l = "encoder.layers." + std::to_string(i) + ".";
      x = sublayer(x, l + "self_attn_norm",
                   [&](auto h) { return attention(h, h, l + "self_attn", true); });
      x = sublayer(x, l + "ffn_norm", [&](auto h) { return ffn(h, l + "ffn"); });
    }
    if (o_.pre_norm) x = layer_norm(x, "encoder.final_norm");
    auto y = embed(tgt, o_.tie_embeddings ? "src_embed.weight" : "tgt_embed.weight");
    for (int64_t i = 0; i < o_.decoder_layers; ++i) {
      auto l = "decoder.layers." + std::to_string(i) + ".";
      y = sublayer(y, l + "self_attn_norm",
                   [&](auto h) { return attention(h, h, l + "self_attn", false); });
      y = sublayer(y, l + "cross_attn_norm",
                   [&](auto h) { return attention(h, x, l + "cross_attn", true); });
      y = sublayer(y, l + "ffn_norm", [&](auto h) { return ffn(h, l + "ffn"); });
    }
    if (o_.pre_norm) y = layer_norm(y, "decoder.final_norm");
    auto w = p_[o_.tie_embeddings ? "src_embed.weight" : "output_proj.weight"];
    return y.matmul(w.t()) + p_["output_proj.bias"];
  }

 private:
  torch::Tensor embed(const torch::Tensor& tokens, const std::string& name) {
    auto rows = p_[name].index_select(0, tokens);
    return rows * std::sqrt(static_cast<double>(o_.d_model)) + pe_.slice(0, 0, tokens.size(0));
  }
  torch::Tensor linear(const torch::Tensor& x, const std::string& name) {
    return x.matmul(p_[name + ".weight"].t()) + p_[name + ".bias"];
  }
  torch::Tensor layer_norm(const torch::Tensor& x, const std::string& name) {
    auto mean = x.mean(-1, true);
    auto var = (x - mean).pow(2).mean(-1, true);
    return (x - mean) / (var + 1e-5).sqrt() * p_[name + ".weight"] + p_[name + ".bias"];
  }
  torch::Tensor ffn(const torch::Tensor& x, const std::string& name) {
    const auto h = linear(x, name + ".fc1");
    return linear(o_.activation == Activation::kSwish ? h / (1 + (-h).exp()) : h.clamp_min(0),
                  name + ".fc2");
  }
  template <typename F>
  torch::Tensor sublayer(const torch::Tensor& x, const std::string& norm, F f) {
    return o_.pre_norm ? x + f(layer_norm(x, norm)) : layer_norm(x + f(x), norm);
  }
  // Query t sees keys 0..t (causal) or all keys; softmax over exactly those.
  torch::Tensor attention(const torch::Tensor& xq, const torch::Tensor& xkv,
                          const std::string& name, bool see_all) {
    auto q = linear(xq, name + ".q_proj"), k = linear(xkv, name + ".k_proj");
    auto v = linear(xkv, name + ".v_proj");
    int64_t dh = o_.d_model / o_.heads;
    auto out = torch::zeros_like(q);
    for (int64_t h = 0; h < o_.heads; ++h) {
      auto cols = Slice(h * dh, (h + 1) * dh);
      for (int64_t t = 0; t < q.size(0); ++t) {
        int64_t visible = see_all ? k.size(0) : t + 1;
        auto keys = k.index({Slice(0, visible), cols}), values = v.index({Slice(0, visible), cols});
        auto scores = keys.matmul(q.index({t, cols})) / std::sqrt(static_cast<double>(dh));
        auto weights = (scores - scores.max()).exp();
        out.index_put_({t, cols}, (weights / weights.sum()).matmul(values));
      }
    }
    return linear(out, name + ".out_proj");
  }

  TransformerOptions o_;
  std::map<std::string, torch::Tensor> p_;
  torch::Tensor pe_;
};

TEST(Transformer, PaddedBatchForwardEqualsReferencePerSentence) {
  // Post-norm and pre-norm, untied and tied; then MarianMT's options (swish, positions in halves)
  // on a tied post-norm model.
  const std::vector<std::pair<bool, bool>> shapes = {
      {false, false}, {false, true}, {true, false}, {true, true}, {false, true}};
  for (size_t s = 0; s < shapes.size(); ++s) {
    const auto [pre_norm, tie] = shapes[s];
    const bool marian = s + 1 == shapes.size();
    auto model = marian ? marian_model() : tiny_model(pre_norm, tie);
    model->to(torch::kDouble);
    ReferenceTransformer reference(model);
    std::vector<torch::Tensor> srcs = {words(5), words(9), words(2)};
    std::vector<torch::Tensor> tgts = {words(7), words(3), words(6)};
    auto logits = model->forward(pad_rows(srcs), pad_rows(tgts));
    for (size_t i = 0; i < srcs.size(); ++i) {
      auto expected = reference.forward(srcs[i], tgts[i]);
      auto actual = logits[i].slice(0, 0, tgts[i].size(0));
      EXPECT_LT((actual - expected).abs().max().item<double>(), 1e-9)
          << "row " << i << " pre_norm=" << pre_norm << " tie=" << tie << " marian=" << marian;
    }
  }
}

TEST(Transformer, FutureTargetTokensNeverChangeEarlierLogits) {
  for (bool pre_norm : {false, true}) {
    auto model = tiny_model(pre_norm);
    auto src = torch::stack({words(6), words(6)});
    auto tgt = torch::stack({words(8), words(8)});
    auto base = model->forward(src, tgt);
    for (int64_t k = 1; k < 8; ++k) {
      auto changed = tgt.clone();
      changed.index_put_({Slice(), Slice(k, None)}, words(8 - k));
      auto logits = model->forward(src, changed);
      auto diff = (logits.slice(1, 0, k) - base.slice(1, 0, k)).abs().max().item<double>();
      EXPECT_LE(diff, 1e-6) << "changed from position " << k << " pre_norm=" << pre_norm;
    }
  }
}

TEST(Transformer, PaddingNeverChangesRealPositions) {
  for (bool pre_norm : {false, true}) {
    auto model = tiny_model(pre_norm);
    auto src_a = words(4), tgt_a = words(3);
    auto alone = model->forward(src_a.unsqueeze(0), tgt_a.unsqueeze(0))[0];
    // Row 0 is padded in both source and target; row 2 is all padding (no NaN may leak).
    auto src = pad_rows({src_a, words(9), torch::full({1}, kPadId, torch::kLong)});
    auto tgt = pad_rows({tgt_a, words(7), torch::full({1}, kPadId, torch::kLong)});
    auto batched = model->forward(src, tgt);
    EXPECT_TRUE(torch::isfinite(batched).all().item<bool>()) << "pre_norm=" << pre_norm;
    EXPECT_LE((batched[0].slice(0, 0, 3) - alone).abs().max().item<double>(), 1e-5);
    auto row1_alone = model->forward(src[1].unsqueeze(0), tgt[1].unsqueeze(0))[0];
    EXPECT_LE((batched[1] - row1_alone).abs().max().item<double>(), 1e-5);
  }
}

// Feeds tgt one token per step and checks each step's logits against decode() of the same rows;
// after step `select_at` keeps rows `keep` only.
void expect_incremental_matches_full(bool pre_norm, bool tie, bool marian = false) {
  auto model = marian ? marian_model() : tiny_model(pre_norm, tie);
  torch::NoGradGuard no_grad;
  auto src = pad_rows({words(5), words(8), words(3)});
  auto tgt = torch::stack({words(6), words(6), words(6)});
  auto memory = model->encode(src);
  auto full = model->decode(tgt, memory, src);  // [3, 6, vocab]
  auto state = model->start_decoding(memory, src);
  const int64_t select_at = 3;
  const std::vector<int64_t> keep = {0, 2};  // drops row 1
  auto rows = torch::arange(3, torch::kLong);
  for (int64_t t = 0; t < 6; ++t) {
    if (t == select_at) {
      state.select(keep, 1);
      rows = rows.index_select(0, torch::tensor(keep));
    }
    auto logits = model->decode_step(tgt.index({rows, t}), state);
    auto expected = full.index({rows, t});
    EXPECT_LE((logits - expected).abs().max().item<double>(), 1e-5)
        << "step " << t << " pre_norm=" << pre_norm << " tie=" << tie;
  }
  EXPECT_EQ(state.step, 6);
  EXPECT_EQ(state.rows(), 2);
  EXPECT_EQ(state.src_pad.size(0), 2);
  EXPECT_EQ(state.layers.at(0).cross_kv.size(0), 2);
}

TEST(Transformer, IncrementalDecodingEqualsFullDecodeIncludingAfterSelect) {
  expect_incremental_matches_full(false, false);
  expect_incremental_matches_full(true, false);
  expect_incremental_matches_full(false, true);
  expect_incremental_matches_full(false, true, /*marian=*/true);
}

// Beam-shaped decoding: one row per sentence, then three per sentence, reordered within their
// sentence, a sentence dropped, back to one row each, and the caches grown past their first
// allocation. Every row's logits equal decode() of that row's own history, at every step.
TEST(Transformer, IncrementalDecodingFollowsBeamReordersAndDrops) {
  auto model = tiny_model(false, true);
  torch::NoGradGuard no_grad;
  auto src = pad_rows({words(5), words(8), words(3)});
  auto memory = model->encode(src);
  auto state = model->start_decoding(memory, src);
  std::vector<std::vector<int64_t>> history(3, std::vector<int64_t>{kBosId});  // fed tokens
  std::vector<int64_t> sentence = {0, 1, 2};  // the source row of each decoder row
  const std::map<int64_t, std::pair<std::vector<int64_t>, int64_t>> selects = {
      {1, {{0, 0, 0, 1, 1, 1, 2, 2, 2}, 3}},
      {3, {{2, 0, 0, 4, 5, 3, 8, 6, 7}, 3}},
      {5, {{0, 1, 2, 6, 6, 8}, 3}},
      {9, {{1, 4}, 1}},
  };
  for (int64_t t = 0; t < 20; ++t) {
    if (auto it = selects.find(t); it != selects.end()) {
      const auto& [rows, width] = it->second;
      state.select(rows, width);
      std::vector<std::vector<int64_t>> kept_history;
      std::vector<int64_t> kept_sentence;
      for (auto r : rows) {
        kept_history.push_back(history[r]);
        kept_sentence.push_back(sentence[r]);
      }
      history = kept_history;
      sentence = kept_sentence;
      ASSERT_EQ(state.width(), width);
    }
    std::vector<int64_t> last;
    for (const auto& h : history) last.push_back(h.back());
    auto logits = model->decode_step(torch::tensor(last), state);
    ASSERT_EQ(logits.size(0), static_cast<int64_t>(history.size()));
    for (size_t r = 0; r < history.size(); ++r) {
      const auto s = sentence[r];
      auto full = model->decode(torch::tensor(history[r]).unsqueeze(0), memory[s].unsqueeze(0),
                                src[s].unsqueeze(0));
      EXPECT_LE((logits[r] - full[0][t]).abs().max().item<double>(), 1e-5)
          << "step " << t << ", row " << r;
      history[r].push_back(words(1).item<int64_t>());
    }
  }
  EXPECT_EQ(state.rows(), 2);
  EXPECT_EQ(state.sentences(), 2);
}

TEST(Transformer, DecoderStateSelectRejectsRowsThatBreakSentences) {
  auto model = tiny_model();
  torch::NoGradGuard no_grad;
  auto src = pad_rows({words(4), words(6)});
  auto state = model->start_decoding(model->encode(src), src);
  model->decode_step(torch::full({2}, kBosId, torch::kLong), state);
  EXPECT_THROW(state.select({1, 0}, 1), std::invalid_argument);     // sentences swap
  EXPECT_THROW(state.select({0, 1}, 2), std::invalid_argument);     // two sentences in one
  EXPECT_THROW(state.select({0, 0, 1}, 2), std::invalid_argument);  // not whole sentences
  EXPECT_THROW(state.select({0, 2}, 1), std::out_of_range);         // no row 2
  state.select({0, 0, 1, 1}, 2);
  EXPECT_EQ(state.rows(), 4);
}

TEST(Transformer, InvalidOptionsAndOverlongInputsThrow) {
  auto options = tiny_options();
  options.heads = 5;
  EXPECT_THROW(Transformer{options}, std::invalid_argument);
  options = tiny_options();
  options.dropout = 1.0;
  EXPECT_THROW(Transformer{options}, std::invalid_argument);
  auto model = tiny_model();
  auto too_long = torch::full({1, 65}, kFirstWord, torch::kLong);
  EXPECT_THROW(model->encode(too_long), std::invalid_argument);
  auto state = model->start_decoding(model->encode(words(3).unsqueeze(0)), words(3).unsqueeze(0));
  state.step = 64;
  EXPECT_THROW(model->decode_step(torch::tensor({kBosId}), state), std::invalid_argument);
}

// Copy task: random words + EOS; target input is BOS + words, output is words + EOS.
struct CopyBatch {
  torch::Tensor src, tgt_in, tgt_out;
};

CopyBatch copy_batch(int64_t rows, int64_t min_len, int64_t max_len) {
  std::vector<torch::Tensor> src, tgt_in, tgt_out;
  for (int64_t r = 0; r < rows; ++r) {
    auto w = words(torch::randint(min_len, max_len + 1, {1}).item<int64_t>());
    auto eos = torch::tensor({kEosId}), bos = torch::tensor({kBosId});
    src.push_back(torch::cat({w, eos}));
    tgt_in.push_back(torch::cat({bos, w}));
    tgt_out.push_back(torch::cat({w, eos}));
  }
  return {pad_rows(src), pad_rows(tgt_in), pad_rows(tgt_out)};
}

double token_accuracy(Transformer& model, const CopyBatch& b) {
  torch::NoGradGuard no_grad;
  auto predicted = model->forward(b.src, b.tgt_in).argmax(-1);
  auto real = b.tgt_out.ne(kPadId);
  return (predicted.eq(b.tgt_out) & real).sum().item<double>() / real.sum().item<double>();
}

TEST(Transformer, LearnsToCopyWithAdam) {
  torch::manual_seed(11);
  auto options = tiny_options();
  options.d_model = 32;
  options.d_ff = 64;
  options.encoder_layers = 1;
  options.decoder_layers = 1;
  options.dropout = 0.0;
  Transformer model(options);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(3e-3));
  auto held_out = copy_batch(64, 3, 8);
  double accuracy = 0;
  for (int step = 1; step <= 600 && accuracy < 0.97; ++step) {
    model->train();
    auto b = copy_batch(32, 3, 8);
    auto logits = model->forward(b.src, b.tgt_in);
    auto loss = torch::nn::functional::cross_entropy(
        logits.view({-1, kVocab}), b.tgt_out.view({-1}),
        torch::nn::functional::CrossEntropyFuncOptions().ignore_index(kPadId));
    adam.zero_grad();
    loss.backward();
    adam.step();
    if (step % 50 == 0) {
      model->eval();
      accuracy = token_accuracy(model, held_out);
    }
  }
  EXPECT_GE(accuracy, 0.95);
}

}  // namespace
}  // namespace tandem::model
