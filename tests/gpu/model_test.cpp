// The model's GPU paths against the CPU (CTest label gpu): the fused output-layer loss in fp32
// and under bf16 autocast, Tandem's CUDA kernels (token loss, column sums, LayerNorm) against
// double sums and the CPU, attention with padding and causal masks (SDPA on the GPU, the BLAS
// kernel on the CPU), the bf16 stream and its linear layers from bf16 weight copies, the autocast
// guard. Every test skips, saying why, where LibTorch sees no GPU, so CI (no GPU) stays green;
// launch/gpu-check.sh runs them on a GPU machine.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#ifdef TANDEM_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#endif

#include "tests/gpu/gpu_support.h"
#include "trainer/common/token_ids.h"
#include "trainer/kernels/cuda/gpu_ops.h"
#include "trainer/kernels/cuda/philox.h"
#include "trainer/kernels/fused/ops.h"
#include "trainer/model/autocast.h"
#include "trainer/model/bf16_linear.h"
#include "trainer/model/token_loss.h"
#include "trainer/model/transformer.h"

namespace tandem {
namespace {

using test::kGpu;
using test::leaf_on;
using test::relative_error;

struct LossCase {
  torch::Tensor rows, weight, bias, targets;  // on the CPU, fp32; targets padded with kPadId
};

LossCase loss_case() {
  torch::manual_seed(11);
  const int64_t vocab = 700, d = 64;
  auto targets = torch::randint(1, vocab, {3, 9}, torch::kLong);
  targets[0].slice(0, 5).fill_(kPadId);
  targets[2].slice(0, 2).fill_(kPadId);
  return {torch::randn({3, 9, d}), torch::randn({vocab, d}) * 0.2, torch::randn({vocab}) * 0.1,
          targets};
}

struct LossResult {
  model::TokenLoss loss;
  torch::Tensor rows_grad, weight_grad, bias_grad;
};

LossResult run_loss(const LossCase& c, const torch::Device& device, bool bf16) {
  auto rows = leaf_on(c.rows, device);
  auto weight = leaf_on(c.weight, device);
  auto bias = leaf_on(c.bias, device);
  model::TokenLoss loss;
  {
    model::AutocastGuard autocast(bf16, device);
    loss = model::projected_token_loss(rows, {weight, {}}, bias, c.targets.to(device), 0.1);
  }
  loss.loss_sum.backward();
  return {loss, rows.grad(), weight.grad(), bias.grad()};
}

TEST(Gpu, ProjectedTokenLossInFp32MatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const auto c = loss_case();
  const auto cpu = run_loss(c, torch::kCPU, false);
  const auto gpu = run_loss(c, kGpu, false);
  EXPECT_EQ(gpu.loss.counts().tokens, cpu.loss.counts().tokens);
  EXPECT_EQ(gpu.loss.counts().correct, cpu.loss.counts().correct);
  EXPECT_LT(relative_error(gpu.loss.loss_sum, cpu.loss.loss_sum), 1e-5);
  EXPECT_NEAR(gpu.loss.counts().nll_sum, cpu.loss.counts().nll_sum,
              1e-5 * cpu.loss.counts().nll_sum);
  // TF32 may be on for cuBLAS products: its 10-bit mantissa bounds the agreement.
  EXPECT_LT(relative_error(gpu.rows_grad, cpu.rows_grad), 2e-3);
  EXPECT_LT(relative_error(gpu.weight_grad, cpu.weight_grad), 2e-3);
  EXPECT_LT(relative_error(gpu.bias_grad, cpu.bias_grad), 2e-3);
}

TEST(Gpu, ProjectedTokenLossUnderBf16AutocastStaysNearTheCpuInFp32) {
  SKIP_WITHOUT_GPU();
  const auto c = loss_case();
  const auto cpu = run_loss(c, torch::kCPU, false);
  const auto gpu = run_loss(c, kGpu, true);
  EXPECT_EQ(gpu.loss.loss_sum.scalar_type(), torch::kFloat);  // sums stay fp32
  EXPECT_EQ(gpu.loss.counts().tokens, cpu.loss.counts().tokens);
  // bf16 operands (8-bit mantissa): errors of a few 1e-3, far below 1e-2.
  EXPECT_LT(relative_error(gpu.loss.loss_sum, cpu.loss.loss_sum), 1e-2);
  EXPECT_LT(relative_error(gpu.rows_grad, cpu.rows_grad), 3e-2);
  EXPECT_LT(relative_error(gpu.weight_grad, cpu.weight_grad), 3e-2);
  EXPECT_LT(relative_error(gpu.bias_grad, cpu.bias_grad), 3e-2);
}

// The token loss kernel on logits in fp32 and bf16 against the formulas in double on the CPU:
// row loss (1 − ε)·nll + ε·mean(−log p), gradient softmax − (1 − ε)[j = t] − ε / V, nothing at
// padding; the argmax is the first largest logit. A vocabulary that is a multiple of 8 is read in
// 16-byte runs, any other an element at a time.
void expect_token_loss_kernel_matches(torch::ScalarType type, int64_t vocab) {
  torch::manual_seed(31);
  const int64_t rows = 37;
  const double eps = 0.1;
  const auto values = (torch::randn({rows, vocab}) * 3).to(type);
  auto targets = torch::randint(1, vocab, {rows}, torch::kLong);
  targets.slice(0, 30).fill_(kPadId);
  const auto x = values.to(torch::kDouble);
  const auto logp = torch::log_softmax(x, 1);
  const auto real = targets.ne(kPadId).to(torch::kDouble);
  const auto nll = -logp.gather(1, targets.unsqueeze(1)).squeeze(1) * real;
  const auto row_loss = (1 - eps) * nll - eps * logp.mean(1) * real;
  auto expected_grad = logp.exp() - eps / vocab;
  expected_grad.scatter_add_(1, targets.unsqueeze(1),
                             torch::full({rows, 1}, -(1 - eps), x.options()));
  expected_grad.mul_(real.unsqueeze(1));
  const int64_t expected_correct =
      (x.argmax(1).eq(targets).to(torch::kDouble) * real).sum().item<int64_t>();

  auto logits = values.to(kGpu).requires_grad_(true);
  const auto loss = model::token_loss(logits, targets.to(kGpu), eps);
  const double tolerance = type == torch::kFloat ? 1e-5 : 1e-2;  // bf16: the written gradient
  EXPECT_LT(relative_error(loss.loss_sum, row_loss.sum()), 1e-5);
  EXPECT_NEAR(loss.counts().nll_sum, nll.sum().item<double>(), 1e-5 * nll.sum().item<double>());
  EXPECT_EQ(loss.counts().tokens, 30);
  EXPECT_EQ(loss.counts().correct, expected_correct);
  loss.loss_sum.backward();
  EXPECT_LT(relative_error(logits.grad().to(torch::kDouble), expected_grad), tolerance);
}

TEST(Gpu, TokenLossKernelMatchesTheFormulasInDouble) {
  SKIP_WITHOUT_OWN_KERNELS();
  for (const int64_t vocab : {1000, 1003}) {
    expect_token_loss_kernel_matches(torch::kFloat, vocab);
    expect_token_loss_kernel_matches(torch::kBFloat16, vocab);
  }
}

// Column sums over one block of rows, many, more rows than blocks (several per thread), widths
// that take 16-byte runs and widths that do not, data that starts off a 16-byte boundary, and no
// rows at all; fp32 and bf16, against double sums of the same values. The same input twice gives
// the same bits (the blocks' partial sums are added in a fixed order). The calls share one set of
// arrival counters, grown as wider inputs come, which each call leaves at zero: a counter
// left over would leave a stripe's sums unwritten in the next call.
TEST(Gpu, ColumnSumsKernelMatchesDoubleSums) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(32);
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{
             {5, 7}, {5000, 300}, {70001, 9}, {4099, 512}, {33, 2048}, {20000, 64}}) {
      const auto a = torch::randn(shape).to(type);
      const auto on_gpu = a.to(kGpu);
      const auto got = kernels::column_sums(on_gpu);
      EXPECT_EQ(got.scalar_type(), torch::kFloat);
      EXPECT_LT(relative_error(got, a.to(torch::kDouble).sum(0)), 1e-5)
          << "rows " << shape[0] << ", cols " << shape[1] << ", type " << type;
      EXPECT_TRUE(torch::equal(kernels::column_sums(on_gpu), got)) << "rows " << shape[0];
    }
    const int64_t rows = 3001, cols = 16;
    const auto flat = torch::randn({rows * cols + 3}).to(type);
    const auto shifted = flat.narrow(0, 3, rows * cols).view({rows, cols});  // off 16 bytes
    EXPECT_LT(relative_error(
                  kernels::column_sums(flat.to(kGpu).narrow(0, 3, rows * cols).view({rows, cols})),
                  shifted.to(torch::kDouble).sum(0)),
              1e-5)
        << "type " << type;
    const auto none = kernels::column_sums(torch::empty({0, cols}, torch::dtype(type).device(kGpu)));
    EXPECT_TRUE(torch::equal(none.cpu(), torch::zeros({cols}))) << "no rows, type " << type;
  }
}

// relu's backward with its bias gradient in one pass: the masked gradient equals LibTorch's
// threshold_backward bit for bit, its column sums the double sums; widths with and without 16-byte
// runs, fp32 and bf16; relu outputs with zeros where the mask cuts.
TEST(Gpu, ReluBackwardColumnSumsMatchThresholdBackward) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(35);
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{4099, 2048}, {300, 12}, {7, 40}}) {
      const auto g = torch::randn(shape).to(type).to(kGpu);
      const auto y = torch::randn(shape).relu().to(type).to(kGpu);
      const auto [masked, sums] = kernels::relu_backward_column_sums(g, y);
      const auto expected = at::threshold_backward(g, y, 0);
      EXPECT_TRUE(torch::equal(masked, expected)) << "rows " << shape[0] << ", type " << type;
      EXPECT_EQ(sums.scalar_type(), torch::kFloat);
      EXPECT_LT(relative_error(sums, expected.to(torch::kDouble).sum(0)), 1e-5)
          << "rows " << shape[0] << ", type " << type;
    }
  }
}

// LayerNorm with the column-sum weight and bias gradients, bf16 input and fp32 parameters on the
// GPU, against LibTorch's fp32 LayerNorm on the CPU; enough rows for several column blocks.
TEST(Gpu, LayerNormKernelGradientsMatchTheCpu) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(33);
  const int64_t d = 64;
  const auto x = (torch::randn({9, 37, d}) * 2 + 0.5).to(torch::kBFloat16).to(torch::kFloat);
  const auto weight = 1 + 0.3 * torch::randn({d}), bias = 0.2 * torch::randn({d});
  const auto upstream = torch::randn({9, 37, d});
  auto cpu_x = leaf_on(x, torch::kCPU), cpu_w = leaf_on(weight, torch::kCPU),
       cpu_b = leaf_on(bias, torch::kCPU);
  const auto cpu_y = torch::layer_norm(cpu_x, {d}, cpu_w, cpu_b, 1e-5);
  (cpu_y * upstream).sum().backward();
  auto gpu_x = x.to(kGpu, torch::kBFloat16).requires_grad_(true);
  auto gpu_w = leaf_on(weight, kGpu), gpu_b = leaf_on(bias, kGpu);
  const auto gpu_y = kernels::layer_norm_own(gpu_x, gpu_w, gpu_b, 1e-5);
  EXPECT_EQ(gpu_y.scalar_type(), torch::kBFloat16);
  (gpu_y.to(torch::kFloat) * upstream.to(kGpu)).sum().backward();
  EXPECT_EQ(gpu_w.grad().scalar_type(), torch::kFloat);
  EXPECT_LT(relative_error(gpu_y, cpu_y), 1e-2);
  EXPECT_LT(relative_error(gpu_x.grad(), cpu_x.grad()), 2e-2);
  EXPECT_LT(relative_error(gpu_w.grad(), cpu_w.grad()), 1e-2);
  EXPECT_LT(relative_error(gpu_b.grad(), cpu_b.grad()), 1e-2);
}

// The dropout mask add_layer_norm_own's next call draws for [rows, d], 1 where kept: philox.h on
// the CPU, at the seed and offset the GPU's generator stands at.
torch::Tensor next_keep_mask(int64_t rows, int64_t d, double p) {
  auto keep = torch::ones({rows, d});
#ifdef TANDEM_CUDA_KERNELS
  auto* generator = at::get_generator_or_default<at::CUDAGeneratorImpl>(
      c10::nullopt, at::cuda::detail::getDefaultCUDAGenerator(0));
  const uint64_t seed = generator->current_seed(), offset = generator->philox_offset_per_thread();
  const uint32_t threshold = kernels::philox::keep_threshold(p);
  auto* k = keep.data_ptr<float>();
  for (int64_t run = 0; run < rows * d / 8; ++run) {
    const auto bits = kernels::philox::draw(seed, offset, static_cast<uint64_t>(run));
    for (int i = 0; i < 8; ++i) k[run * 8 + i] = kernels::philox::kept(bits, i, threshold) ? 1 : 0;
  }
#endif
  return keep;
}

// Post-norm's dropout, residual add and LayerNorm in one kernel (and its backward in another),
// bf16 rows 512 wide (the base shape's) and 200 (runs some lanes do not have), against the add of
// the bf16 values, x through the mask the CPU draws from the same Philox stream, rounded to bf16,
// and LibTorch's fp32 LayerNorm on the CPU. Residual gets the sum's gradient, x that through the
// mask.
void expect_add_layer_norm_matches(int64_t d, double p) {
  SCOPED_TRACE("d " + std::to_string(d) + ", p " + std::to_string(p));
  const int64_t rows = 7 * 45;
  const auto residual = (torch::randn({7, 45, d}) * 3).to(torch::kBFloat16).to(torch::kFloat);
  const auto x = (torch::randn({7, 45, d}) + 0.5).to(torch::kBFloat16).to(torch::kFloat);
  const auto weight = 1 + 0.3 * torch::randn({d}), bias = 0.2 * torch::randn({d});
  const auto upstream = torch::randn({7, 45, d});
  const auto keep = next_keep_mask(rows, d, p).view({7, 45, d});
  const auto scale = static_cast<float>(1.0 / (1.0 - p));
  auto cpu_r = leaf_on(residual, torch::kCPU), cpu_x = leaf_on(x, torch::kCPU);
  auto cpu_w = leaf_on(weight, torch::kCPU), cpu_b = leaf_on(bias, torch::kCPU);
  const auto sum = cpu_r + cpu_x * (keep * scale);
  const auto rounded = sum + (sum.detach().to(torch::kBFloat16).to(torch::kFloat) - sum.detach());
  const auto cpu_y = torch::layer_norm(rounded, {d}, cpu_w, cpu_b, 1e-5);
  (cpu_y * upstream).sum().backward();
  auto gpu_r = residual.to(kGpu, torch::kBFloat16).requires_grad_(true);
  auto gpu_x = x.to(kGpu, torch::kBFloat16).requires_grad_(true);
  auto gpu_w = leaf_on(weight, kGpu), gpu_b = leaf_on(bias, kGpu);
  ASSERT_TRUE(kernels::add_layer_norm_own_for(gpu_r, gpu_x));
  const auto gpu_y = kernels::add_layer_norm_own(gpu_r, gpu_x, gpu_w, gpu_b, 1e-5, p);
  EXPECT_EQ(gpu_y.scalar_type(), torch::kBFloat16);
  (gpu_y.to(torch::kFloat) * upstream.to(kGpu)).sum().backward();
  EXPECT_LT(relative_error(gpu_y, cpu_y), 1e-2);
  EXPECT_LT(relative_error(gpu_r.grad(), cpu_r.grad()), 2e-2);
  EXPECT_LT(relative_error(gpu_x.grad(), cpu_x.grad()), 2e-2);
  EXPECT_LT(relative_error(gpu_w.grad(), cpu_w.grad()), 1e-2);
  EXPECT_LT(relative_error(gpu_b.grad(), cpu_b.grad()), 1e-2);
  const auto x_grad = gpu_x.grad().to(torch::kCPU, torch::kFloat);
  EXPECT_EQ((x_grad * (1 - keep)).abs().max().item<float>(), 0.f);  // dropped: no gradient
  if (p == 0) {
    EXPECT_TRUE(torch::equal(gpu_r.grad(), gpu_x.grad()));
  } else {
    // 161,280 or 63,000 draws of the mask: within 6 standard deviations of the kept share.
    EXPECT_NEAR(keep.mean().item<double>(), 1 - p, 6 * std::sqrt(p * (1 - p) / keep.numel()));
  }
}

TEST(Gpu, AddLayerNormKernelMatchesTheCpu) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(34);
  expect_add_layer_norm_matches(512, 0.0);
  expect_add_layer_norm_matches(200, 0.0);
  const auto odd = torch::zeros({3, 12}, torch::dtype(torch::kBFloat16).device(kGpu));
  EXPECT_FALSE(kernels::add_layer_norm_own_for(odd, odd));  // 12 is not a multiple of 8
}

// The same with dropout inside: the mask the CPU draws from philox.h at the generator's seed and
// offset is the one the forward kernel applied and the backward kernel drew again; each call
// moves the generator on, so the next mask differs.
TEST(Gpu, DropoutAddLayerNormKeepsPhiloxsMaskBothWays) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(35);
  expect_add_layer_norm_matches(512, 0.1);
  expect_add_layer_norm_matches(200, 0.3);
  const auto before = next_keep_mask(7 * 45, 512, 0.1);
  const auto r = torch::zeros({7 * 45, 512}, torch::dtype(torch::kBFloat16).device(kGpu));
  const auto w = torch::ones({512}, kGpu), b = torch::zeros({512}, kGpu);
  kernels::add_layer_norm_own(r, r, w, b, 1e-5, 0.1);
  EXPECT_FALSE(torch::equal(before, next_keep_mask(7 * 45, 512, 0.1)));
}

// Self-attention (the decoder's, causal; the encoder's, padding hidden) and cross-attention
// (padding hidden), forward and backward.
void expect_attention_matches(bool self, bool causal, bool bf16, int64_t batch = 3) {
  torch::manual_seed(5);
  const int64_t len = 11, d = 64, heads = 4;
  const auto q_rows = torch::randn({batch, len, self ? 3 * d : d});
  const auto kv = self ? torch::Tensor() : torch::randn({batch, len + 2, 2 * d});
  auto pad = torch::zeros({batch, self ? len : len + 2}, torch::kBool);
  pad[1].slice(0, 7).fill_(true);
  pad[2].slice(0, 3).fill_(true);
  // Padded query rows of causal self-attention are free to differ: the CPU kernel also hides the
  // padded keys from them, SDPA (causal alone) does not; nothing downstream reads those rows (later
  // positions never see them and the loss skips them), so they get no gradient and are not
  // compared.
  const auto real_rows = self && causal ? pad.logical_not().unsqueeze(2).to(torch::kFloat)
                                        : torch::ones({batch, len, 1});
  const auto upstream = torch::randn({batch, len, d}) * real_rows;
  auto run = [&](const torch::Device& device, bool autocast) {
    auto q = leaf_on(q_rows, device);
    auto k = self ? torch::Tensor() : leaf_on(kv, device);
    torch::Tensor out;
    {
      model::AutocastGuard guard(autocast, device);
      out = kernels::fused_attention(q, k, heads, kernels::AttentionMask{pad.to(device), causal});
    }
    (out.to(torch::kFloat) * upstream.to(device)).sum().backward();
    return std::make_tuple(out.detach().to(torch::kFloat) * real_rows.to(device), q.grad(),
                           self ? torch::Tensor() : k.grad());
  };
  const auto [cpu_out, cpu_q, cpu_kv] = run(torch::kCPU, false);
  const auto [gpu_out, gpu_q, gpu_kv] = run(kGpu, bf16);
  const double tolerance = bf16 ? 3e-2 : 2e-3;
  EXPECT_LT(relative_error(gpu_out, cpu_out), tolerance);
  EXPECT_LT(relative_error(gpu_q, cpu_q), tolerance);
  if (!self) {
    EXPECT_LT(relative_error(gpu_kv, cpu_kv), tolerance);
  }
}

TEST(Gpu, CausalPaddedSelfAttentionMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  expect_attention_matches(true, true, false);
  expect_attention_matches(true, true, true);
}

TEST(Gpu, PaddedSelfAttentionMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  expect_attention_matches(true, false, false);
  expect_attention_matches(true, false, true);
}

TEST(Gpu, PaddedCrossAttentionMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  expect_attention_matches(false, false, false);
  expect_attention_matches(false, false, true);
}

// More sentences than the fused kernels' grid holds in its batch dimension (65,535): the batch
// goes through in parts, and the whole matches the CPU's (one launch would fail, "invalid argument").
TEST(Gpu, AttentionOverMoreSentencesThanTheKernelsGridHoldsMatchesTheCpu) {
  SKIP_WITHOUT_GPU();
  const int64_t batch = 65535 + 2;
  expect_attention_matches(true, false, true, batch);
  expect_attention_matches(true, true, false, batch);
  expect_attention_matches(false, false, false, batch);
}

// Under bf16 autocast on a GPU the activations between the matrix products are bf16 (the residual
// stream, LayerNorm, dropout), and the whole model's loss and gradients stay near the CPU's in
// fp32 from the same initial weights.
// The model the bf16-stream tests train: 2+2 layers of width 64, untied, with `dropout`.
model::TransformerOptions bf16_stream_options(double dropout) {
  model::TransformerOptions o;
  o.vocab_size = 300;
  o.d_model = 64;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 128;
  o.dropout = dropout;
  o.tie_embeddings = false;
  return o;
}

TEST(Gpu, Bf16StreamModelStaysNearTheCpuInFp32) {
  SKIP_WITHOUT_GPU();
  const model::TransformerOptions o = bf16_stream_options(0.0);
  torch::manual_seed(21);
  model::Transformer cpu(o);
  torch::manual_seed(21);
  model::Transformer gpu(o);
  gpu->to(kGpu);
  torch::manual_seed(22);
  auto src = torch::randint(4, o.vocab_size, {5, 13}, torch::kLong);
  auto tgt = torch::randint(4, o.vocab_size, {5, 11}, torch::kLong);
  src[1].slice(0, 8).fill_(kPadId);
  src[3].slice(0, 4).fill_(kPadId);
  tgt[2].slice(0, 6).fill_(kPadId);
  const auto tgt_in = tgt.slice(1, 0, 10), tgt_out = tgt.slice(1, 1, 11);

  const auto cpu_loss = cpu->loss(src, tgt_in, tgt_out, 0.1);
  cpu_loss.loss_sum.backward();
  model::TokenLoss gpu_loss;
  {
    model::AutocastGuard autocast(true, kGpu);
    EXPECT_TRUE(model::bf16_stream(kGpu));
    EXPECT_EQ(gpu->encode(src.to(kGpu)).scalar_type(), torch::kBFloat16);
    gpu_loss = gpu->loss(src.to(kGpu), tgt_in.to(kGpu), tgt_out.to(kGpu), 0.1);
  }
  EXPECT_FALSE(model::bf16_stream(kGpu));
  gpu_loss.loss_sum.backward();
  EXPECT_LT(relative_error(gpu_loss.loss_sum, cpu_loss.loss_sum), 1e-2);
  std::vector<torch::Tensor> cpu_grads, gpu_grads;
  const auto gpu_params = gpu->named_parameters();
  for (const auto& p : cpu->named_parameters()) {
    const auto& g = gpu_params[p.key()].grad();
    ASSERT_TRUE(g.defined()) << p.key();
    EXPECT_EQ(g.scalar_type(), torch::kFloat) << p.key();
    EXPECT_TRUE(torch::isfinite(g).all().item<bool>()) << p.key();
    cpu_grads.push_back(p.value().grad().flatten());
    gpu_grads.push_back(g.flatten());
  }
  // bf16 through four layers: 4.9% measured on an H200 (a wrong or missing term gives ~100%).
  EXPECT_LT(relative_error(torch::cat(gpu_grads), torch::cat(cpu_grads)), 8e-2);
}

// Activation checkpointing on a GPU: the bf16 stream with dropout (post-norm's dropout inside the
// add + LayerNorm kernel, drawn from the GPU's Philox stream) gives, recomputed, the gradients of
// the layers run once: bitwise, unless the GPU's own kernels are not deterministic run to run, in
// which case no further apart than two runs without it are.
std::vector<torch::Tensor> bf16_gradients(bool recompute) {
  model::TransformerOptions o = bf16_stream_options(0.1);
  o.recompute_layers = recompute;
  torch::manual_seed(31);
  model::Transformer gpu(o);
  gpu->to(kGpu);
  gpu->train();
  torch::manual_seed(32);
  torch::cuda::manual_seed_all(33);
  const auto src = torch::randint(4, o.vocab_size, {6, 13}, torch::kLong).to(kGpu);
  const auto tgt = torch::randint(4, o.vocab_size, {6, 11}, torch::kLong).to(kGpu);
  model::TokenLoss loss;
  {
    model::AutocastGuard autocast(true, kGpu);
    loss = gpu->loss(src, tgt.slice(1, 0, 10), tgt.slice(1, 1, 11), 0.1);
  }
  loss.loss_sum.backward();
  std::vector<torch::Tensor> grads;
  for (const auto& p : gpu->parameters()) grads.push_back(p.grad().detach().to(torch::kCPU));
  return grads;
}

TEST(Gpu, RecomputedLayersInTheBf16StreamGiveTheGradientsOfLayersRunOnce) {
  SKIP_WITHOUT_GPU();
  const auto once = bf16_gradients(false), again = bf16_gradients(false);
  const auto recomputed = bf16_gradients(true);
  ASSERT_EQ(once.size(), recomputed.size());
  for (size_t i = 0; i < once.size(); ++i) {
    const double noise = (once[i] - again[i]).abs().max().item<double>();
    const double apart = (once[i] - recomputed[i]).abs().max().item<double>();
    EXPECT_LE(apart, noise) << "parameter " << i << " (noise between two plain runs " << noise
                            << ")";
  }
}

// The bf16 stream's linear layer on the GPU (the bf16 weight copy, relu in the product's epilogue,
// fp32 weight gradients from the product and bias gradients from column sums) against the same
// layer on the CPU, for stacked parts and for relu; the copy is made once until a weight changes.
TEST(Gpu, Bf16LinearMatchesTheCpu) {
  SKIP_WITHOUT_OWN_KERNELS();
  for (const bool relu : {false, true}) {
    torch::manual_seed(relu ? 52 : 51);
    const int64_t in = 64, rows = 300;
    const std::vector<int64_t> outs =
        relu ? std::vector<int64_t>{256} : std::vector<int64_t>{64, 64, 64};
    std::vector<torch::Tensor> weights, biases;
    for (int64_t out : outs) {
      weights.push_back(0.1 * torch::randn({out, in}));
      biases.push_back(0.5 * torch::randn({out}));
    }
    const auto x = torch::randn({rows, in}).to(torch::kBFloat16);
    int64_t total = 0;
    for (int64_t out : outs) total += out;
    const auto upstream = torch::randn({rows, total});
    struct Result {
      torch::Tensor y, x_grad;
      std::vector<torch::Tensor> weight_grads, bias_grads;
      int64_t copies = 0;
    };
    auto run = [&](const torch::Device& device) {
      std::vector<torch::Tensor> w, b;
      for (size_t i = 0; i < outs.size(); ++i) {
        w.push_back(leaf_on(weights[i], device));
        b.push_back(leaf_on(biases[i], device));
      }
      auto xs = leaf_on(x, device);
      model::Bf16Linear linear(w, b);
      Result r;
      r.y = linear(xs, relu);
      linear(xs, relu);  // the copy is current: not made again
      (r.y.to(torch::kFloat) * upstream.to(device)).sum().backward();
      r.x_grad = xs.grad();
      for (size_t i = 0; i < outs.size(); ++i) {
        EXPECT_EQ(w[i].grad().scalar_type(), torch::kFloat);
        EXPECT_EQ(b[i].grad().scalar_type(), torch::kFloat);
        r.weight_grads.push_back(w[i].grad());
        r.bias_grads.push_back(b[i].grad());
      }
      r.copies = linear.copy().copies_made();
      return r;
    };
    const Result cpu = run(torch::kCPU), gpu = run(kGpu);
    EXPECT_EQ(gpu.copies, 1);
    EXPECT_LT(relative_error(gpu.y, cpu.y), 1e-2) << "relu " << relu;
    EXPECT_LT(relative_error(gpu.x_grad, cpu.x_grad), 1e-2) << "relu " << relu;
    for (size_t i = 0; i < outs.size(); ++i) {
      EXPECT_LT(relative_error(gpu.weight_grads[i], cpu.weight_grads[i]), 1e-2) << i;
      EXPECT_LT(relative_error(gpu.bias_grads[i], cpu.bias_grads[i]), 1e-2) << i;
    }
  }
}

TEST(Gpu, AutocastGuardTurnsBf16OnForItsScopeOnly) {
  SKIP_WITHOUT_GPU();
  const auto a = torch::randn({8, 8}, kGpu), b = torch::randn({8, 8}, kGpu);
  EXPECT_FALSE(model::autocast_enabled(kGpu));
  {
    model::AutocastGuard on(true, kGpu);
    EXPECT_TRUE(model::autocast_enabled(kGpu));
    EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kBFloat16);
    {
      model::AutocastGuard off(false, kGpu);  // disabled guards leave the state alone
      EXPECT_TRUE(model::autocast_enabled(kGpu));
    }
  }
  EXPECT_FALSE(model::autocast_enabled(kGpu));
  EXPECT_EQ(torch::mm(a, b).scalar_type(), torch::kFloat);
}
}  // namespace
}  // namespace tandem
