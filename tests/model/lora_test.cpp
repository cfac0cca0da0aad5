// LoRA (lora.h, adapter.h): which layers get adapters, that a fresh adapter changes nothing, that a
// trained one computes what its merge into the weights computes, that a frozen base (in float32
// or held in bf16 or int8) gives the adapters the gradients of a trainable one, and the errors.
#include "trainer/model/lora.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "trainer/kernels/cpu/int8_linear.h"
#include "trainer/model/frozen_base.h"

namespace tandem::model {
namespace {

TransformerOptions options(bool pre_norm = true, Activation activation = Activation::kRelu) {
  TransformerOptions o;
  o.vocab_size = 29;
  o.d_model = 16;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 24;
  o.dropout = 0.0;
  o.pre_norm = pre_norm;
  o.tie_embeddings = true;
  o.activation = activation;
  return o;
}

// Two models with the same weights.
std::pair<Transformer, Transformer> twins(const TransformerOptions& o) {
  torch::manual_seed(5);
  Transformer a(o);
  torch::manual_seed(5);
  Transformer b(o);
  return {a, b};
}

struct Batch {
  torch::Tensor src, tgt_in, tgt_out;
};

Batch batch() {
  torch::manual_seed(17);
  const auto src = torch::randint(4, 29, {3, 7}, torch::kLong);
  const auto tgt = torch::randint(4, 29, {3, 6}, torch::kLong);
  return {src, tgt.narrow(1, 0, 5), tgt.narrow(1, 1, 5)};
}

const std::vector<std::string> kAll{"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"};

TEST(Lora, AdaptsTheNamedLayersAndFreezesEverythingElse) {
  auto [model, unused] = twins(options());
  const auto adapted =
      add_adapters(model, {"q_proj", "v_proj", "decoder.layers.1.ffn.fc2"}, {4, 8, 0});
  // Encoder: 2 layers x self q, v; decoder: 2 layers x (self, cross) x q, v; one fc2.
  EXPECT_EQ(adapted.size(), 2u * 2 + 2u * 4 + 1);
  EXPECT_EQ(adapted.front(), "encoder.layers.0.self_attn.q_proj");
  EXPECT_EQ(adapted.back(), "decoder.layers.1.ffn.fc2");
  int64_t trained = 0;
  for (const auto& item : model->named_parameters()) {
    EXPECT_EQ(item.value().requires_grad(), is_adapter_parameter(item.key())) << item.key();
    if (item.value().requires_grad()) ++trained;
  }
  EXPECT_EQ(trained, 2 * 13);
  const auto params = model->named_parameters();
  EXPECT_EQ(params["decoder.layers.1.cross_attn.v_proj.lora_a"].sizes(),
            (torch::IntArrayRef{4, 16}));
  EXPECT_EQ(params["decoder.layers.1.ffn.fc2.lora_b"].sizes(), (torch::IntArrayRef{16, 4}));
  EXPECT_EQ(params["decoder.layers.1.ffn.fc2.lora_b"].abs().sum().item<float>(), 0.0f);
}

TEST(Lora, ATargetThatNamesNoLayerIsAnError) {
  for (const std::string target :
       {"ffn_norm", "attn.q_proj", "encoder.layers.2.ffn.fc1", "qproj"}) {
    auto [model, unused] = twins(options());
    try {
      add_adapters(model, {"q_proj", target}, {4, 8, 0});
      ADD_FAILURE() << target;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("lora.targets: '" + target + "' names no layer", 0), 0u)
          << e.what();
    }
  }
}

TEST(Lora, FreshAdaptersLeaveTheModelsOutputAsItWas) {
  auto [plain, adapted] = twins(options());
  add_adapters(adapted, kAll, {4, 8, 0});
  const Batch b = batch();
  torch::NoGradGuard no_grad;
  plain->eval();
  adapted->eval();
  EXPECT_TRUE(torch::equal(plain->forward(b.src, b.tgt_in), adapted->forward(b.src, b.tgt_in)));
}

// Trained adapters (B no longer zero) compute what the same adapters merged into the weights
// compute, for post- and pre-norm, relu and swish, training (loss) and incremental decoding.
TEST(Lora, TrainedAdaptersComputeWhatTheirMergeComputes) {
  for (const bool pre_norm : {false, true}) {
    const auto o = options(pre_norm, pre_norm ? Activation::kRelu : Activation::kSwish);
    auto [merged, adapted] = twins(o);
    auto plain = twins(o).first;
    add_adapters(adapted, kAll, {3, 6, 0});
    std::vector<std::pair<std::string, torch::Tensor>> adapters;
    {
      torch::NoGradGuard no_grad;
      torch::manual_seed(23);
      for (auto& item : adapted->named_parameters()) {
        if (item.key().find("lora_b") != std::string::npos) item.value().normal_(0, 0.3);
        if (is_adapter_parameter(item.key()))
          adapters.emplace_back(item.key(), item.value().clone());
      }
    }
    merge_adapters(merged, adapters, 6.0 / 3);
    const Batch b = batch();
    merged->eval();
    adapted->eval();
    plain->eval();
    torch::NoGradGuard no_grad;
    const auto want = merged->forward(b.src, b.tgt_in), got = adapted->forward(b.src, b.tgt_in);
    EXPECT_GT((want - plain->forward(b.src, b.tgt_in)).abs().max().item<float>(), 1e-2);
    EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-5)) << (got - want).abs().max();
    // One decoding step from the encoded batch, cached keys and values included.
    auto state_m = merged->start_decoding(merged->encode(b.src), b.src);
    auto state_a = adapted->start_decoding(adapted->encode(b.src), b.src);
    const auto first = b.tgt_in.select(1, 0);
    for (int step = 0; step < 2; ++step) {
      const auto lm = merged->decode_step(first, state_m),
                 la = adapted->decode_step(first, state_a);
      EXPECT_TRUE(torch::allclose(la, lm, 1e-5, 1e-5)) << (la - lm).abs().max();
    }
  }
}

// Adapter gradients from one loss's backward pass; B drawn nonzero first, the same in every call.
std::map<std::string, torch::Tensor> adapter_gradients(
    Transformer& model, const std::vector<std::string>& targets = kAll) {
  torch::manual_seed(31);
  add_adapters(model, targets, {4, 8, 0});
  {
    torch::NoGradGuard no_grad;
    for (auto& item : model->named_parameters()) {
      if (item.key().find("lora_b") != std::string::npos) item.value().normal_(0, 0.3);
    }
  }
  model->train();
  const Batch b = batch();
  model->loss(b.src, b.tgt_in, b.tgt_out, 0.1).loss_sum.backward();
  std::map<std::string, torch::Tensor> grads;
  for (const auto& item : model->named_parameters()) {
    if (is_adapter_parameter(item.key())) grads[item.key()] = item.value().grad();
  }
  return grads;
}

// The base's weight matrices (embeddings and linear layers) as `type`, rounded through bf16.
void round_matrices(Transformer& model, torch::ScalarType type) {
  torch::NoGradGuard no_grad;
  for (auto& p : model->parameters()) {
    if (p.dim() == 2) p.set_data(p.to(torch::kBFloat16).to(type));
  }
}

// A set with one bad matrix, in the layer merged last (so that every other adapter would have
// been merged before it), is refused before any weight changes (peft's safe_merge): every
// parameter keeps its bytes. Then the good set merges.
TEST(Lora, AMergeOfASetWithOneBadMatrixChangesNoWeight) {
  auto [model, source] = twins(options());
  add_adapters(source, kAll, {3, 6, 0});
  std::vector<std::pair<std::string, torch::Tensor>> adapters;
  std::string last;  // the layer merged last: its path sorts last
  torch::manual_seed(29);
  for (auto& item : source->named_parameters()) {
    if (!is_adapter_parameter(item.key())) continue;
    adapters.emplace_back(item.key(), torch::randn(item.value().sizes()));
    last = std::max(last, item.key().substr(0, item.key().rfind('.')));
  }
  ASSERT_EQ(last, "encoder.layers.1.self_attn.v_proj");  // weight [16, 16], A [3, 16], B [16, 3]
  std::map<std::string, torch::Tensor> before;
  for (const auto& item : model->named_parameters()) before[item.key()] = item.value().clone();
  const auto unchanged = [&] {
    for (const auto& item : model->named_parameters()) {
      EXPECT_TRUE(torch::equal(item.value(), before.at(item.key()))) << item.key();
    }
  };
  const std::string misfit = "adapter '" + last + "' does not fit its layer's weight";
  const std::vector<std::tuple<std::string, std::vector<int64_t>, std::string>> bad = {
      {".lora_b", {16, 4}, misfit},  // B's rank 4, A's 3
      {".lora_a", {3, 17}, misfit},  // 17 inputs, the weight's 16
      {".lora_b", {16}, misfit},
      {".lora_b", {}, "adapter '" + last + "' has no lora_b"}};
  for (const auto& [matrix, shape, says] : bad) {
    std::vector<std::pair<std::string, torch::Tensor>> set;
    for (const auto& [name, tensor] : adapters) {
      if (name != last + matrix) {
        set.emplace_back(name, tensor);
      } else if (!shape.empty()) {
        set.emplace_back(name, torch::randn(shape));
      }
    }
    try {
      merge_adapters(model, set, 2.0);
      ADD_FAILURE() << matrix;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()), says);
    }
    unchanged();
  }
  merge_adapters(model, adapters, 2.0);
  EXPECT_FALSE(
      torch::equal(model->named_parameters()[last + ".weight"], before.at(last + ".weight")));
}

TEST(Lora, AFrozenBaseGivesTheAdaptersTheGradientsOfATrainableOne) {
  auto [frozen, trainable] = twins(options());
  const auto want = adapter_gradients(frozen);
  for (const auto& item : frozen->named_parameters()) {
    if (!is_adapter_parameter(item.key())) {
      EXPECT_FALSE(item.value().grad().defined()) << item.key();
    }
  }
  // The same pass with every base parameter trainable too (the output layer's own gradients made).
  torch::manual_seed(31);
  add_adapters(trainable, kAll, {4, 8, 0});
  {
    torch::NoGradGuard no_grad;
    for (auto& item : trainable->named_parameters()) {
      item.value().requires_grad_(true);
      if (item.key().find("lora_b") != std::string::npos) item.value().normal_(0, 0.3);
    }
  }
  trainable->train();
  const Batch b = batch();
  trainable->loss(b.src, b.tgt_in, b.tgt_out, 0.1).loss_sum.backward();
  ASSERT_EQ(want.size(), 2u * (2 * 4 + 2 * 8 + 4 * 2));
  for (const auto& [name, grad] : want) {
    const auto other = trainable->named_parameters()[name].grad();
    ASSERT_TRUE(grad.defined() && other.defined()) << name;
    EXPECT_TRUE(torch::equal(grad, other)) << name;
  }
  EXPECT_TRUE(trainable->named_parameters()["src_embed.weight"].grad().defined());
}

// A model whose base is held narrower computes, with adapters beside `targets`, the adapters'
// gradients and the logits (in float32) of its twin holding those values in float32.
void expect_same_computation(Transformer& held, Transformer& rounded,
                             const std::vector<std::string>& targets) {
    const auto got = adapter_gradients(held, targets), want = adapter_gradients(rounded, targets);
    for (const auto& [name, grad] : want) {
      // float32 sums of the same terms in another order (the held layer's kernels, OpenBLAS's
      // for the float32 twin) differ by rounding that scales with the largest terms, not with
      // each element: on an AMD EPYC (Zen 2, AVX2) host an element of 0.005 in a gradient whose
      // largest is 3.8 differed by 1.07e-6. A wrong dequantization is off by far more.
      const double atol = 1e-6 * std::max(1.0, grad.abs().max().item<double>());
      EXPECT_TRUE(torch::allclose(got.at(name), grad, 1e-5, atol))
          << name << ": largest difference " << (got.at(name) - grad).abs().max().item<double>();
    }
    held->eval();
    rounded->eval();
    torch::NoGradGuard no_grad;
    const Batch b = batch();
    const auto a = held->forward(b.src, b.tgt_in), c = rounded->forward(b.src, b.tgt_in);
    EXPECT_EQ(a.scalar_type(), torch::kFloat32);
    EXPECT_TRUE(torch::allclose(a, c, 1e-5, 1e-5)) << (a - c).abs().max();
}

// A base held in bf16 computes in float32 what a float32 base of the same (rounded) values does,
// with adapters beside every layer or beside the attention alone (the feed-forward layers' relu
// then runs in place on the products of the frozen weights).
TEST(Lora, ABaseHeldInBf16ComputesAsItsValuesInFloat32) {
  for (const auto& targets :
       {kAll, std::vector<std::string>{"q_proj", "k_proj", "v_proj", "out_proj"}}) {
    auto [held, rounded] = twins(options());
    round_matrices(held, torch::kBFloat16);
    round_matrices(rounded, torch::kFloat32);
    EXPECT_EQ(held->named_parameters()["src_embed.weight"].scalar_type(), torch::kBFloat16);
    expect_same_computation(held, rounded, targets);
  }
}

// Each layer's weight matrices held in int8 (hold_frozen), or set to what that int8 stands for in
// float32 (kernels::quantize_rows' values times their scales).
void quantize_matrices(Transformer& model, bool held) {
  for (const auto& layer : model->modules()) {
    for (const auto& item : layer->named_parameters(/*recurse=*/false)) {
      if (item.value().dim() != 2) continue;
      const auto value = item.value().detach().clone();
      if (held) {
        hold_frozen(*layer, item.key(), value, HeldAs::kInt8);
      } else {
        const auto q = kernels::quantize_rows(value);
        torch::NoGradGuard no_grad;
        item.value().set_data(q.values.to(torch::kFloat) * q.scales.unsqueeze(1));
      }
    }
  }
}

// A base held in int8 computes in float32 what a float32 base of its dequantized values does:
// the embeddings looked up and the tied output layer (both int8), the attention and the
// feed-forward layers, with adapters beside every layer or the attention alone.
TEST(Lora, ABaseHeldInInt8ComputesAsItsDequantizedValuesInFloat32) {
  for (const auto& targets :
       {kAll, std::vector<std::string>{"q_proj", "k_proj", "v_proj", "out_proj"}}) {
    auto [held, rounded] = twins(options(/*pre_norm=*/true, Activation::kSwish));
    quantize_matrices(held, true);
    quantize_matrices(rounded, false);
    EXPECT_EQ(held->named_parameters()["src_embed.weight"].scalar_type(), torch::kChar);
    EXPECT_EQ(held->named_buffers()["src_embed.weight_scale"].sizes(),
              torch::IntArrayRef({29}));
    expect_same_computation(held, rounded, targets);
  }
}

// Int8 as Tandem's decoding quantizes: per row, the largest magnitude to 127, halves to even;
// rows of 300,000 are quantized 3 rows at a time (2^20 elements), so 5 rows take two blocks.
TEST(Lora, Int8RowsAreQuantizedAsANaiveLoopQuantizesThem) {
  torch::manual_seed(3);
  const int64_t rows = 5, cols = 300000;
  auto w = torch::randn({rows, cols});
  w[2].zero_();
  w[3][4] = 2.5F * (w[3].abs().max().item<float>() / 127.0F);  // near a half step
  const auto q = kernels::quantize_rows(w);
  const auto wa = w.accessor<float, 2>();
  const auto qa = q.values.accessor<int8_t, 2>();
  for (int64_t r = 0; r < rows; ++r) {
    float top = 0;
    for (int64_t c = 0; c < cols; ++c) top = std::max(top, std::fabs(wa[r][c]));
    const float scale = top > 0 ? top / 127.0F : 1.0F;
    EXPECT_EQ(q.scales[r].item<float>(), scale) << r;
    int64_t differ = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const float v = std::clamp(std::nearbyint(wa[r][c] / scale), -127.0F, 127.0F);
      differ += qa[r][c] != static_cast<int8_t>(v);
    }
    EXPECT_EQ(differ, 0) << "row " << r;
  }
}

}  // namespace
}  // namespace tandem::model
