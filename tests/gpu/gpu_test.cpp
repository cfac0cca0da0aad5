// The GPU against the CPU (CTest label gpu): the fused output-layer loss in fp32 and under bf16
// autocast, Tandem's CUDA kernels (token loss, column sums, LayerNorm) against double sums and the
// CPU, attention with padding and causal masks (SDPA on the GPU, the BLAS kernel on the CPU), the
// autocast guard, Adam gated on the device (fused or masked), NCCL at world size 1, and steps that
// never wait for the GPU. Every test skips, saying why, where LibTorch sees no GPU, so CI (no GPU)
// stays green; launch/gpu-check.sh runs them on a GPU machine.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "trainer/checkpoint/model_io.h"
#include "trainer/common/temp_dir.h"
#include "trainer/common/token_ids.h"
#include "trainer/model/autocast.h"
#include "trainer/model/bf16_linear.h"
#include "trainer/model/gpu_ops.h"
#include "trainer/model/kernels.h"
#include "trainer/model/token_loss.h"
#include "trainer/model/transformer.h"
#include "trainer/optim/adam.h"
#include "trainer/optim/ema.h"
#include "trainer/optim/multi_tensor.h"
#include "trainer/parallel/gradient_reducer.h"
#include "trainer/parallel/process_group.h"
#include "trainer/train/batch_fit.h"
#include "trainer/train/trainer.h"

#ifdef TANDEM_TORCH_CUDA
#include <c10/cuda/CUDAFunctions.h>
#endif

namespace tandem {
namespace {

#define SKIP_WITHOUT_GPU()                                                     \
  if (!torch::cuda::is_available()) {                                          \
    GTEST_SKIP() << "no GPU visible to LibTorch (or a LibTorch without CUDA)"; \
  }

const torch::Device kGpu(torch::kCUDA, 0);

// This process as a world of one (MPI initialised once, finalised at exit).
parallel::ProcessGroup& world() {
  static parallel::ProcessGroup group(nullptr, nullptr);
  return group;
}

// ‖a − b‖ / ‖b‖ over all elements, in double on the CPU.
double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  const auto x = a.detach().to(torch::kCPU, torch::kDouble);
  const auto y = b.detach().to(torch::kCPU, torch::kDouble);
  return (x - y).norm().item<double>() / y.norm().item<double>();
}

// A fresh leaf on `device` holding t's values: t.to(kCPU) would hand back t itself, so the CPU run
// would mark (and, in Adam's case, update) the very tensor the GPU run starts from.
torch::Tensor leaf_on(const torch::Tensor& t, const torch::Device& device) {
  return t.detach().clone().to(device).requires_grad_(true);
}

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
    loss = model::projected_token_loss(rows, weight, bias, c.targets.to(device), 0.1);
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

#define SKIP_WITHOUT_OWN_KERNELS()                                                        \
  SKIP_WITHOUT_GPU();                                                                     \
  if (!model::own_kernels_for(torch::zeros({1}, kGpu))) {                                 \
    GTEST_SKIP() << "this build has no CUDA kernels of its own (or TANDEM_KERNELS=aten)"; \
  }

// The token loss kernel on logits in fp32 and bf16 against the formulas in double on the CPU:
// row loss (1 − ε)·nll + ε·mean(−log p), gradient softmax − (1 − ε)[j = t] − ε / V, nothing at
// padding; the argmax is the first largest logit.
void expect_token_loss_kernel_matches(torch::ScalarType type) {
  torch::manual_seed(31);
  const int64_t rows = 37, vocab = 1000;
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
  expect_token_loss_kernel_matches(torch::kFloat);
  expect_token_loss_kernel_matches(torch::kBFloat16);
}

// Column sums over one block of rows, many, and more rows than blocks (several per thread), fp32
// and bf16, against double sums of the same values.
TEST(Gpu, ColumnSumsKernelMatchesDoubleSums) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(32);
  for (const auto type : {torch::kFloat, torch::kBFloat16}) {
    for (const auto& shape : std::vector<std::vector<int64_t>>{{5, 7}, {5000, 300}, {70001, 9}}) {
      const auto a = torch::randn(shape).to(type);
      const auto got = model::column_sums(a.to(kGpu));
      EXPECT_EQ(got.scalar_type(), torch::kFloat);
      EXPECT_LT(relative_error(got, a.to(torch::kDouble).sum(0)), 1e-5)
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
  const auto gpu_y = model::layer_norm_own(gpu_x, gpu_w, gpu_b, 1e-5);
  EXPECT_EQ(gpu_y.scalar_type(), torch::kBFloat16);
  (gpu_y.to(torch::kFloat) * upstream.to(kGpu)).sum().backward();
  EXPECT_EQ(gpu_w.grad().scalar_type(), torch::kFloat);
  EXPECT_LT(relative_error(gpu_y, cpu_y), 1e-2);
  EXPECT_LT(relative_error(gpu_x.grad(), cpu_x.grad()), 2e-2);
  EXPECT_LT(relative_error(gpu_w.grad(), cpu_w.grad()), 1e-2);
  EXPECT_LT(relative_error(gpu_b.grad(), cpu_b.grad()), 1e-2);
}

// Self-attention (causal, with padding) and cross-attention (padding), forward and backward.
void expect_attention_matches(bool self, bool bf16) {
  torch::manual_seed(5);
  const int64_t batch = 3, len = 11, d = 64, heads = 4;
  const auto q_rows = torch::randn({batch, len, self ? 3 * d : d});
  const auto kv = self ? torch::Tensor() : torch::randn({batch, len + 2, 2 * d});
  auto pad = torch::zeros({batch, self ? len : len + 2}, torch::kBool);
  pad[1].slice(0, 7).fill_(true);
  pad[2].slice(0, 3).fill_(true);
  // Padded query rows of causal self-attention are free to differ: the CPU kernel also hides the
  // padded keys from them, SDPA (causal alone) does not; nothing downstream reads those rows (later
  // positions never see them and the loss skips them), so they get no gradient and are not
  // compared.
  const auto real_rows =
      self ? pad.logical_not().unsqueeze(2).to(torch::kFloat) : torch::ones({batch, len, 1});
  const auto upstream = torch::randn({batch, len, d}) * real_rows;
  auto run = [&](const torch::Device& device, bool autocast) {
    auto q = leaf_on(q_rows, device);
    auto k = self ? torch::Tensor() : leaf_on(kv, device);
    torch::Tensor out;
    {
      model::AutocastGuard guard(autocast, device);
      out = model::fused_attention(q, k, heads, model::AttentionMask{pad.to(device), self});
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
  expect_attention_matches(true, false);
  expect_attention_matches(true, true);
}

TEST(Gpu, PaddedCrossAttentionMatchesTheCpuKernel) {
  SKIP_WITHOUT_GPU();
  expect_attention_matches(false, false);
  expect_attention_matches(false, true);
}

// Under bf16 autocast on a GPU the activations between the matrix products are bf16 (the residual
// stream, LayerNorm, dropout), and the whole model's loss and gradients stay near the CPU's in
// fp32 from the same initial weights.
TEST(Gpu, Bf16StreamModelStaysNearTheCpuInFp32) {
  SKIP_WITHOUT_GPU();
  model::TransformerOptions o;
  o.vocab_size = 300;
  o.d_model = 64;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 2;
  o.d_ff = 128;
  o.dropout = 0.0;
  o.tie_embeddings = false;
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

// The moving average on the GPU (multi-tensor operations) follows the CPU's lerps through taken
// and skipped updates; a skipped one leaves it bit for bit.
TEST(Gpu, EmaOnTheGpuFollowsTheCpu) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(53);
  const auto w = torch::randn({40, 7}), b = torch::randn({7});
  auto cpu_w = w.clone(), cpu_b = b.clone();
  auto gpu_w = w.to(kGpu), gpu_b = b.to(kGpu);
  optim::Ema cpu({{"w", cpu_w}, {"b", cpu_b}}, 0.9), gpu({{"w", gpu_w}, {"b", gpu_b}}, 0.9);
  for (int step = 1; step <= 6; ++step) {
    const bool take = step != 4;
    {
      torch::NoGradGuard no_grad;
      for (auto* t : {&cpu_w, &cpu_b, &gpu_w, &gpu_b}) t->add_(torch::sin(*t * step));
    }
    const auto before = gpu.averages()[0].second.clone();
    cpu.update(step, torch::scalar_tensor(take, torch::kBool));
    gpu.update(step, torch::scalar_tensor(take, torch::TensorOptions(kGpu).dtype(torch::kBool)));
    if (!take) {
      EXPECT_TRUE(torch::equal(gpu.averages()[0].second, before));
    }
  }
  for (size_t i = 0; i < 2; ++i) {
    // The parameters themselves drift ~1e-7 apart (sin on each device); a wrong weight is ~1e-1.
    EXPECT_LT(relative_error(gpu.averages()[i].second, cpu.averages()[i].second), 1e-5);
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

// Adam gated on the device (fused Adam where LibTorch has it; its clip factor as the gradient
// scale, a non-finite step as found_inf) against the CPU loop reading the same gate, through a
// clipped step and a skipped one with NaN gradients; and the masked tensor-op update on the GPU.
TEST(Gpu, AdamGatedOnTheDeviceMatchesTheCpuThroughClippedAndSkippedSteps) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(3);
  const std::vector<std::vector<int64_t>> shapes = {{17, 5}, {5}, {3, 4, 6}, {1}};
  std::vector<torch::Tensor> initial, grads;
  for (const auto& shape : shapes) {
    initial.push_back(torch::randn(shape));
    grads.push_back(torch::randn(shape));
  }
  const int skipped_step = 3;
  auto run = [&](const torch::Device& device) {
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (size_t i = 0; i < initial.size(); ++i) {
      named.emplace_back("p" + std::to_string(i), leaf_on(initial[i], device));
    }
    optim::Adam adam(named, optim::AdamOptions{0.9, 0.98, 1e-8});
    for (int step = 1; step <= 5; ++step) {
      adam.zero_grad();
      for (size_t i = 0; i < named.size(); ++i) {
        named[i].second.mutable_grad() = (grads[i] * step).to(device);
      }
      if (step == skipped_step) named[1].second.grad()[2] = std::nanf("");
      const auto gate = optim::gate_gradients(adam.parameters(), 5.0);  // clips from step 1
      EXPECT_EQ(gate.finite.device(), device);
      adam.step(1e-2, gate);
    }
    EXPECT_EQ(adam.step_count(), 4);
    return named;
  };
  const auto cpu = run(torch::kCPU);
  const auto gpu = run(kGpu);
  for (size_t i = 0; i < cpu.size(); ++i) {
    EXPECT_LT(relative_error(gpu[i].second, cpu[i].second), 1e-6) << cpu[i].first;
  }
  // The masked update, as it runs where fused Adam is missing, on the GPU against the CPU.
  auto masked = [&](const torch::Device& device) {
    std::vector<torch::Tensor> params, m, v;
    for (const auto& t : initial) {
      params.push_back(t.to(device).clone());
      m.push_back(torch::zeros_like(params.back()));
      v.push_back(torch::zeros_like(params.back()));
    }
    auto step = torch::zeros({}, torch::TensorOptions(device).dtype(torch::kFloat32));
    for (int s = 1; s <= 3; ++s) {
      std::vector<torch::Tensor> g;
      for (const auto& t : grads) g.push_back((t * s).to(device));
      const auto o = torch::TensorOptions(device).dtype(torch::kFloat64);
      const optim::AdamUpdate u{0.9,
                                0.98,
                                1e-8,
                                1e-2,
                                torch::full({}, 0.5, o),
                                torch::full({}, s != 2, o.dtype(torch::kBool))};
      optim::adam_masked_update(params, g, m, v, step, u);
    }
    return params;
  };
  const auto masked_cpu = masked(torch::kCPU), masked_gpu = masked(kGpu);
  for (size_t i = 0; i < masked_cpu.size(); ++i) {
    EXPECT_LT(relative_error(masked_gpu[i], masked_cpu[i]), 1e-6) << i;
  }
}

// Test double: a world of two whose other rank is this one's twin, so an all-reduce doubles the
// tensor. Enough for the reducer to hook the gradients (it does not in a world of one).
class TwinCommunicator : public parallel::Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "twin"; }
  void all_reduce_sum(torch::Tensor& tensor) override {
    tensor.mul_(2);
    ++tensor_calls;
  }
  void broadcast(torch::Tensor&, int) override {}
  void barrier() override {}
  double all_reduce_sum(double value) override { return 2 * value; }
  std::vector<uint64_t> all_gather(uint64_t value) override { return {value, value}; }
  std::vector<std::string> gather_bytes(const std::string& bytes, int) override {
    return {bytes, bytes};
  }
  std::string broadcast_bytes(const std::string& bytes, int) override { return bytes; }
  std::atomic<int> tensor_calls{0};  // from autograd's threads during backward
};

// The reducer's hooks fire where autograd runs the backward pass (its device thread for a GPU),
// launch buckets before the pass ends, and the result is scale * (sum over the twins) of plain
// backward's gradients.
void expect_reducer_matches_plain_backward(const torch::Device& device) {
  torch::manual_seed(9);
  const auto x = torch::randn({6, 32}).to(device);
  std::vector<torch::Tensor> initial = {torch::randn({64, 32}), torch::randn({64}),
                                        torch::randn({16, 64}), torch::randn({16})};
  auto loss_of = [&](const std::vector<torch::Tensor>& p) {
    auto h = torch::tanh(torch::matmul(x, p[0].t()) + p[1]);
    return (torch::matmul(h, p[2].t()) + p[3]).pow(2).sum();
  };
  std::vector<torch::Tensor> plain, hooked;
  for (const auto& t : initial) {
    plain.push_back(leaf_on(t, device));
    hooked.push_back(leaf_on(t, device));
  }
  loss_of(plain).backward();

  TwinCommunicator twin;
  // Byte-sized caps: one bucket per tensor, so most launch from hooks during the pass.
  parallel::GradientReducer reducer(hooked, twin, 1e-6, 1e-6);
  reducer.prepare_for_backward();
  loss_of(hooked).backward();
  reducer.end_backward();
  const double scale = 0.25;
  reducer.finish(scale);

  EXPECT_EQ(twin.tensor_calls.load(), static_cast<int>(reducer.buckets().size()));
  int during = 0;
  for (const auto& launch : reducer.last_launches()) during += launch.during_backward;
  EXPECT_GE(during, 1) << "no bucket was launched by a gradient hook";
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(hooked[i].grad().device(), device);
    EXPECT_LT(relative_error(hooked[i].grad(), plain[i].grad() * (2 * scale)), 1e-6) << i;
  }
}

TEST(Gpu, GradientReducerHooksMatchPlainBackwardOnTheCpu) {
  expect_reducer_matches_plain_backward(torch::kCPU);  // runs everywhere, CI included
}

TEST(Gpu, GradientReducerHooksMatchPlainBackwardOnTheGpu) {
  SKIP_WITHOUT_GPU();
  expect_reducer_matches_plain_backward(kGpu);
}

#ifdef TANDEM_HAVE_NCCL
TEST(Gpu, NcclAtWorldSizeOneReducesToItself) {
  SKIP_WITHOUT_GPU();
  auto nccl = parallel::make_nccl_communicator(world(), 0, 60.0);
  auto values = torch::arange(10, torch::TensorOptions(kGpu).dtype(torch::kFloat32));
  auto copy = values.clone();
  nccl->all_reduce_sum(values);
  auto work = nccl->all_reduce_sum_async(copy);
  work->fence();
  EXPECT_TRUE(torch::equal(values.cpu(), torch::arange(10, torch::kFloat32)));
  EXPECT_TRUE(torch::equal(copy.cpu(), values.cpu()));
  nccl->barrier();
}
#endif

// One rank's run on the GPU in bf16: a small model (width 64, 2 + 2 layers) on a synthetic corpus
// in `dir`, no checkpoints on the way.
config::Config small_gpu_run(const std::string& dir,
                             const test::SyntheticCorpusOptions& corpus = {}) {
  config::Config c;
  c.model.d_model = 64;
  c.model.heads = 4;
  c.model.encoder_layers = 2;
  c.model.decoder_layers = 2;
  c.model.d_ff = 128;
  c.data.corpus = test::make_reverse_corpus(dir, corpus);
  c.train.device = config::Device::kCuda;
  c.train.precision = config::Precision::kBf16;
  c.checkpoint.dir = dir + "/run";
  c.checkpoint.every_steps = 0;
  return c;
}

// data.max_tokens: auto on a GPU: a trial step far beyond the device's memory is refused (its
// out-of-memory error caught, nothing left behind, the device usable after it), and a Trainer
// of a small model gets the largest batch, 65,536 tokens, and trains with it.
TEST(Gpu, AutoMaxTokensFitsTheBatchToTheDevice) {
  SKIP_WITHOUT_GPU();
  TempDir dir("gpu-fit");
  config::Config c = small_gpu_run(dir.path());
  c.data.max_tokens = config::kAutoMaxTokens;
  train::Trainer trainer(c, world());
  EXPECT_EQ(trainer.config().data.max_tokens, train::kFitMaxTokens);
  EXPECT_GT(trainer.train_step().tgt_tokens, 0);

  torch::manual_seed(7);
  const int64_t vocab = 64;
  model::Transformer model(checkpoint::model_options(c.model, vocab));
  model->to(kGpu);
  const runtime::DeviceChoice gpu{kGpu, true, "cuda:0"};
  // 2^27 tokens: 17 GB for each bf16 activation of width 64, hundreds of GB in all.
  EXPECT_FALSE(train::step_fits(model, gpu, int64_t{1} << 27, 128, vocab));
  for (const auto& p : model->parameters()) EXPECT_FALSE(p.grad().defined());
  EXPECT_TRUE(train::step_fits(model, gpu, 4096, 128, vocab));
}

// A training step in its steady state never makes the host wait for the GPU: LibTorch's sync
// debug mode, set to error, throws at any synchronising call (.item(), a blocking copy, a stream
// synchronisation) made through it during five steps after three warm-up ones. One rank, NCCL,
// bf16, a moving average and clipping on, so every part of the update runs.
TEST(Gpu, SteadyStateStepsNeverWaitForTheGpu) {
  SKIP_WITHOUT_GPU();
#ifndef TANDEM_TORCH_CUDA
  GTEST_SKIP() << "built without a CUDA LibTorch (no sync debug mode to ask)";
#else
  TempDir dir("gpu-sync");
  test::SyntheticCorpusOptions corpus;
  corpus.train_pairs = 2000;
  config::Config c = small_gpu_run(dir.path(), corpus);
  c.data.max_tokens = 512;
  c.train.clip_norm = 0.1;  // clips every step
  c.train.ema_decay = 0.99;
  train::Trainer trainer(c, world());
  for (int s = 0; s < 3; ++s) trainer.train_step();  // allocations, handles, first collectives
  torch::cuda::synchronize();
  auto& warnings = c10::cuda::warning_state();
  warnings.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_ERROR);
  std::string error;
  std::vector<train::StepStats> steps;
  try {
    for (int s = 0; s < 5; ++s) steps.push_back(trainer.train_step());
  } catch (const std::exception& e) {
    error = e.what();
  }
  warnings.set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  EXPECT_EQ(error, "") << "a step synchronised with the GPU";
  ASSERT_EQ(steps.size(), 5u);
  for (const auto& step : steps) {
    EXPECT_EQ(step.update.device(), kGpu);
    EXPECT_GT(step.tgt_tokens, 0);
    EXPECT_EQ(step.update[1].item<double>(), 0.0) << "step " << step.step << " was skipped";
  }
  EXPECT_EQ(trainer.step(), 8);
#endif
}

}  // namespace
}  // namespace tandem
