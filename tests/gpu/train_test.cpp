// Training on the GPU (CTest label gpu): the moving average and Adam gated on the device against
// the CPU, the bf16 weight copies after fused Adam steps, the gradient reducer's hooks, NCCL at
// world size 1, data.max_tokens: auto, and steps that never wait for the GPU. Every test skips,
// saying why, where LibTorch sees no GPU; launch/gpu-check.sh runs them on a GPU machine.
#include <gtest/gtest.h>
#include <torch/cuda.h>
#include <torch/torch.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/gpu/gpu_support.h"
#include "trainer/common/temp_dir.h"
#include "trainer/model/bf16_linear.h"
#include "trainer/model_io/model_io.h"
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

using test::kGpu;
using test::leaf_on;
using test::relative_error;
using test::world;

// Adam's fused GPU update reaches the bf16 weight copies the linear layers compute with: the
// kernel does not count its writes in the parameters' version counters, so fused_adam_update
// does. Without that the copies kept the first step's weights for the whole run.
TEST(Gpu, Bf16CopiesFollowFusedAdamSteps) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(36);
  auto weight = leaf_on(torch::randn({64, 32}), kGpu), bias = leaf_on(torch::randn({64}), kGpu);
  model::Bf16Copy copy({{weight}, {bias}});
  optim::Adam adam({{"w", weight}, {"b", bias}}, optim::AdamOptions{0.9, 0.98, 1e-8});
  for (int step = 1; step <= 3; ++step) {
    EXPECT_TRUE(torch::equal(copy.get()[0], weight.detach().to(torch::kBFloat16))) << step;
    EXPECT_TRUE(torch::equal(copy.get()[1], bias.detach().to(torch::kBFloat16))) << step;
    weight.mutable_grad() = torch::randn_like(weight);
    bias.mutable_grad() = torch::randn_like(bias);
    adam.step(1e-1, optim::gate_gradients(adam.parameters(), 0.0));
  }
  EXPECT_TRUE(torch::equal(copy.get()[0], weight.detach().to(torch::kBFloat16)));
  EXPECT_EQ(copy.copies_made(), 4);
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

// The list kernels over more parts than one launch takes (64), of sizes 0, 1, odd and large: the
// bf16 copies equal LibTorch's conversion, and the moving average LibTorch's three passes (a
// difference, a product, a sum), bit for bit.
TEST(Gpu, ListKernelsMatchLibTorchBitForBit) {
  SKIP_WITHOUT_OWN_KERNELS();
  torch::manual_seed(71);
  std::vector<torch::Tensor> sources, targets, averages, expected;
  const auto weight = torch::full({}, 0.0123f, kGpu);
  for (int i = 0; i < 150; ++i) {
    const int64_t n = i % 7 == 0 ? 0 : i == 5 ? 300001 : i == 8 ? 1 : (i * 37) % 1001;
    sources.push_back(torch::randn({n}, kGpu) * 3);
    targets.push_back(torch::empty({n}, torch::TensorOptions(kGpu).dtype(torch::kBFloat16)));
    averages.push_back(torch::randn({n}, kGpu));
    expected.push_back(averages.back() + (sources.back() - averages.back()) * weight);
  }
  kernels::copy_to_bf16(sources, targets);
  kernels::moving_average_(averages, sources, weight);
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_TRUE(torch::equal(targets[i], sources[i].to(torch::kBFloat16))) << i;
    EXPECT_TRUE(torch::equal(averages[i], expected[i])) << i;
  }
  // A weight of 0 (a skipped update) leaves every average as it was.
  const auto before = averages[5].clone();
  kernels::moving_average_(averages, sources, torch::zeros({}, kGpu));
  EXPECT_TRUE(torch::equal(averages[5], before));
  // A target of the wrong type or size is refused, naming it.
  targets[3] = torch::empty({1}, torch::TensorOptions(kGpu).dtype(torch::kBFloat16));
  EXPECT_THROW(kernels::copy_to_bf16(sources, targets), std::invalid_argument);
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
      const auto version = named[0].second._version();
      adam.step(1e-2, gate);
      // The CPU reads the gate and skips the write; the GPU's kernel is told, and is counted.
      if (device.is_cpu() && step == skipped_step) {
        EXPECT_EQ(named[0].second._version(), version) << "a skipped step counted a write";
      } else {
        EXPECT_GT(named[0].second._version(), version) << "an update the version counter missed";
      }
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
