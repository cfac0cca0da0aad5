// Bucketed, overlapped gradient reduction under mpirun (np 2 and 4), on a small MLP with byte-sized
// bucket caps so it has several buckets. Every reduced gradient is compared with the same sum
// computed in one process (each rank recomputes every rank's loss on hook-free copies of the
// parameters), and the collectives are counted by the communicator.
#include "trainer/parallel/gradient_reducer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "trainer/parallel/mpi_communicator.h"

namespace tandem::parallel {
namespace {

constexpr double kBytes = 1.0 / (1024.0 * 1024.0);  // one byte, in the reducer's MiB
constexpr double kScale = 1.0 / 7.0;

// x -> W3 tanh(W2 tanh(W1 x + b1) + b2) + b3, plus a parameter `extra` that a loss may leave out.
// Registration order W1 b1 W2 b2 W3 b3 (bytes 512 64 1024 64 256 16), then extra (20 bytes) last
// or, with extra_first, first.
struct Mlp {
  explicit Mlp(bool extra_first) {
    torch::manual_seed(7);  // the same on every rank
    std::vector<torch::Tensor> layers = {torch::randn({16, 8}),  torch::randn({16}),
                                         torch::randn({16, 16}), torch::randn({16}),
                                         torch::randn({4, 16}),  torch::randn({4})};
    torch::Tensor extra = torch::randn({5});
    if (extra_first) params.push_back(extra);
    params.insert(params.end(), layers.begin(), layers.end());
    if (!extra_first) params.push_back(extra);
    for (auto& p : params) p.requires_grad_(true);
    extra_index = extra_first ? 0 : params.size() - 1;
    first_layer = extra_first ? 1 : 0;
  }
  // Rank q's loss: sum of squared outputs on inputs only q knows, plus |extra|^2 if asked.
  torch::Tensor loss(const std::vector<torch::Tensor>& p, int q, bool with_extra) const {
    const torch::Tensor x = torch::sin(torch::arange(24, torch::kFloat32) * (q + 1)).view({3, 8});
    const auto layer = [&](int k) { return p[first_layer + k]; };
    auto h = torch::tanh(torch::matmul(x, layer(0).t()) + layer(1));
    h = torch::tanh(torch::matmul(h, layer(2).t()) + layer(3));
    auto out = torch::matmul(h, layer(4).t()) + layer(5);
    auto total = (out * out).sum();
    return with_extra ? total + (p[extra_index] * p[extra_index]).sum() : total;
  }
  std::vector<torch::Tensor> params;
  size_t extra_index = 0;
  size_t first_layer = 0;
};

// The reference: scale * the sum over ranks of every backward pass they make, on copies of the
// parameters (new leaves, so no reducer hooks), in one process.
std::vector<torch::Tensor> summed_in_one_process(
    const Mlp& mlp, int world,
    const std::function<void(const std::vector<torch::Tensor>&, int)>& passes) {
  std::vector<torch::Tensor> copies;
  for (const auto& p : mlp.params) copies.push_back(p.detach().clone().requires_grad_(true));
  for (int q = 0; q < world; ++q) passes(copies, q);
  std::vector<torch::Tensor> sums;
  for (auto& c : copies)
    sums.push_back(c.grad().defined() ? c.grad() * kScale : torch::zeros_like(c));
  return sums;
}

void expect_gradients(const Mlp& mlp, const std::vector<torch::Tensor>& expected) {
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(mlp.params[i].grad().defined()) << "parameter " << i;
    EXPECT_TRUE(torch::allclose(mlp.params[i].grad(), expected[i], 1e-5, 1e-6))
        << "parameter " << i << ": max |difference| "
        << (mlp.params[i].grad() - expected[i]).abs().max().item<double>();
  }
}

// Two micro-batches of rank r: the first (rank r's inputs, with extra) only accumulates; the second
// (inputs of rank r + size, without extra) completes the step, after `reducer`'s
// prepare_for_backward() where one is given, so extra's gradient comes from the first.
void two_micro_batches(const Mlp& mlp, const std::vector<torch::Tensor>& p, int r, int size,
                       GradientReducer* reducer) {
  mlp.loss(p, r, /*with_extra=*/true).backward();
  if (reducer != nullptr) reducer->prepare_for_backward();
  mlp.loss(p, r + size, /*with_extra=*/false).backward();
}

TEST(GradientReducer, BucketsTakeParametersInReverseOrderUpToTheCaps) {
  // Reverse: b3 16, W3 256 | b2 64, W2 1024 | b1 64, W1 512, extra 20 (first cap 300, then 1100).
  Mlp mlp(/*extra_first=*/true);
  EXPECT_EQ(GradientReducer::plan_buckets(mlp.params, 1100 * kBytes, 300 * kBytes),
            (std::vector<std::vector<size_t>>{{6, 5}, {4, 3}, {2, 1, 0}}));
  // Too big for any cap: a bucket each; another dtype starts a bucket.
  std::vector<torch::Tensor> mixed = {torch::zeros({100}), torch::zeros({2}),
                                      torch::zeros({2}, torch::kFloat64), torch::zeros({1})};
  EXPECT_EQ(GradientReducer::plan_buckets(mixed, 64 * kBytes, 8 * kBytes),
            (std::vector<std::vector<size_t>>{{3}, {2}, {1}, {0}}));
  EXPECT_EQ(GradientReducer::plan_buckets(mixed, 1.0, 1.0),
            (std::vector<std::vector<size_t>>{{3}, {2}, {1, 0}}));
  EXPECT_THROW(GradientReducer::plan_buckets(mixed, 0.0, 1.0), std::invalid_argument);
}

TEST(GradientReducer, BucketsStartDuringBackwardAndSumLikeOneProcess) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/true);
  GradientReducer reducer(mlp.params, comm, 1100 * kBytes, 300 * kBytes);
  ASSERT_EQ(reducer.buckets().size(), 3u);

  reducer.prepare_for_backward();
  mlp.loss(mlp.params, comm.rank(), /*with_extra=*/true).backward();
  reducer.end_backward();
  reducer.finish(kScale);

  const auto every_rank = [&](const auto& p, int q) { mlp.loss(p, q, true).backward(); };
  expect_gradients(mlp, summed_in_one_process(mlp, comm.size(), every_rank));
  // The output layer's bucket is complete long before W1's gradient exists.
  const auto& launches = reducer.last_launches();
  ASSERT_EQ(launches.size(), 3u);
  for (int64_t b = 0; b < 3; ++b) EXPECT_EQ(launches[b].bucket, b);
  EXPECT_TRUE(launches[0].during_backward);
  EXPECT_LT(launches[0].seconds, 0.0);
  EXPECT_EQ(reducer.all_reduce_calls(), 3);
  EXPECT_EQ(comm.async_all_reduces(), 3u);
  EXPECT_EQ(comm.collectives(), 3u);
}

TEST(GradientReducer, UnusedParametersAndRanksWithoutDataStillSendEveryBucketInOrder) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/false);  // extra is in bucket 0, and no loss uses it
  GradientReducer reducer(mlp.params, comm, 1100 * kBytes, 300 * kBytes);
  const int idle = comm.size() - 1;  // this rank has no data: no backward pass at all
  for (int step = 0; step < 2; ++step) {
    reducer.prepare_for_backward();
    if (comm.rank() != idle) mlp.loss(mlp.params, comm.rank(), /*with_extra=*/false).backward();
    reducer.end_backward();
    reducer.finish(kScale);

    auto expected = summed_in_one_process(mlp, comm.size(), [&](const auto& p, int q) {
      if (q != idle) mlp.loss(p, q, false).backward();
    });
    expect_gradients(mlp, expected);
    EXPECT_TRUE(torch::equal(mlp.params[mlp.extra_index].grad(), torch::zeros({5})));
    // Bucket 0 waits for extra's gradient, which never comes: nothing may overtake it.
    const auto& launches = reducer.last_launches();
    ASSERT_EQ(launches.size(), reducer.buckets().size());
    for (size_t b = 0; b < launches.size(); ++b) {
      EXPECT_EQ(launches[b].bucket, static_cast<int64_t>(b));
      EXPECT_FALSE(launches[b].during_backward);
    }
    for (auto& p : mlp.params) p.mutable_grad().zero_();
  }
  EXPECT_EQ(comm.async_all_reduces(), 2 * reducer.buckets().size());
}

TEST(GradientReducer, AccumulationReducesOncePerStepWhatEveryMicroBatchAdded) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/true);
  GradientReducer reducer(mlp.params, comm, 1100 * kBytes, 300 * kBytes);
  two_micro_batches(mlp, mlp.params, comm.rank(), comm.size(), &reducer);
  reducer.end_backward();
  reducer.finish(kScale);

  const auto every_rank = [&](const auto& p, int q) {
    two_micro_batches(mlp, p, q, comm.size(), nullptr);
  };
  expect_gradients(mlp, summed_in_one_process(mlp, comm.size(), every_rank));
  EXPECT_EQ(reducer.all_reduce_calls(), 3);
  EXPECT_EQ(comm.collectives(), 3u);  // one per bucket, not per micro-batch or per parameter
  EXPECT_TRUE(reducer.last_launches()[0].during_backward);
}

// After the first reduction every gradient is a view into its bucket: the second step's backward
// pass accumulates into the buckets themselves and is still summed like one process. A gradient
// replaced by a tensor of its own (as the fault injection's NaN is) is copied in, then a view
// again.
TEST(GradientReducer, GradientsBecomeBucketViewsAndAReplacedOneIsCopiedIn) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/true);
  GradientReducer reducer(mlp.params, comm, 1100 * kBytes, 300 * kBytes);
  const auto step = [&] {
    reducer.prepare_for_backward();
    mlp.loss(mlp.params, comm.rank(), /*with_extra=*/true).backward();
    reducer.end_backward();
    reducer.finish(kScale);
  };
  const auto every_rank = [&](const auto& p, int q) { mlp.loss(p, q, true).backward(); };
  step();
  for (size_t i = 0; i < mlp.params.size(); ++i) EXPECT_TRUE(reducer.grad_is_bucket_view(i)) << i;
  const std::vector<const void*> views = [&] {
    std::vector<const void*> ptrs;
    for (const auto& p : mlp.params) ptrs.push_back(p.grad().data_ptr());
    return ptrs;
  }();

  for (auto& p : mlp.params) p.mutable_grad().zero_();  // as Adam::zero_grad: the buffers stay
  mlp.params[2].mutable_grad() = torch::zeros_like(mlp.params[2]);  // replaced
  EXPECT_FALSE(reducer.grad_is_bucket_view(2));
  step();
  expect_gradients(mlp, summed_in_one_process(mlp, comm.size(), every_rank));
  for (size_t i = 0; i < mlp.params.size(); ++i) {
    EXPECT_TRUE(reducer.grad_is_bucket_view(i)) << i;
    EXPECT_EQ(mlp.params[i].grad().data_ptr(), views[i]) << i;
  }
}

// Gradients sharded (ZeRO stage 2): the parameters of Mlp(extra_first) cut into runs as a ShardPlan
// cuts them, ranks rising along the elements: W1 and W3 whole, on a rank that depends on the
// parameter, the others (W2, alone in its bucket under caps of 1000 and 300 bytes, among them)
// across every rank.
std::vector<GradientRun> cut_among(const Mlp& mlp, int ranks) {
  std::vector<GradientRun> runs;
  for (size_t i = 0; i < mlp.params.size(); ++i) {
    const int64_t n = mlp.params[i].numel();
    if (n < 2 * ranks || i == 1 || i == 5) {
      runs.push_back({i, 0, n, static_cast<int>(i) % ranks});
      continue;
    }
    for (int r = 0; r < ranks; ++r) {
      runs.push_back({i, n * r / ranks, n * (r + 1) / ranks, r});
    }
  }
  return runs;
}

// Each rank holds the one-process sums of its runs, over two steps (the second accumulating two
// micro-batches, a round each, one parameter unused in the last), and keeps no whole gradient.
TEST(GradientReducer, ShardedGradientsGiveEachRankTheSumsOfItsRunsOnly) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/true);
  const auto runs = cut_among(mlp, comm.size());
  GradientReducer reducer(mlp.params, comm, 1000 * kBytes, 300 * kBytes, runs);
  ASSERT_TRUE(reducer.sharded());
  // W2 (parameter 3) alone: sent as its gradient is, the others laid out rank by rank.
  ASSERT_EQ(reducer.buckets(), (std::vector<std::vector<size_t>>{{6, 5}, {4}, {3}, {2, 1, 0}}));
  const auto expect_owned = [&](const std::vector<torch::Tensor>& sums) {
    const auto& owned = reducer.owned_gradients();
    size_t k = 0;
    for (const GradientRun& run : runs) {
      if (run.rank != comm.rank()) continue;
      ASSERT_LT(k, owned.size());
      const auto expected = sums[run.param].reshape({-1}).narrow(0, run.begin, run.end - run.begin);
      EXPECT_TRUE(torch::allclose(owned[k].reshape({-1}), expected, 1e-5, 1e-6))
          << "parameter " << run.param << " [" << run.begin << ", " << run.end << ")";
      if (run.begin == 0 && run.end == mlp.params[run.param].numel()) {
        EXPECT_EQ(owned[k].sizes(), mlp.params[run.param].sizes());
      }
      ++k;
    }
    EXPECT_EQ(k, owned.size());
    for (size_t i = 0; i < mlp.params.size(); ++i) {
      EXPECT_FALSE(mlp.params[i].grad().defined()) << "parameter " << i << " kept its gradient";
    }
  };

  reducer.prepare_for_backward();
  mlp.loss(mlp.params, comm.rank(), /*with_extra=*/true).backward();
  reducer.end_backward();
  reducer.finish(kScale);
  expect_owned(summed_in_one_process(
      mlp, comm.size(), [&](const auto& p, int q) { mlp.loss(p, q, true).backward(); }));

  // Accumulating, each micro-batch is a round of its own: no whole gradient outlives it.
  reducer.prepare_for_backward();
  mlp.loss(mlp.params, comm.rank(), /*with_extra=*/true).backward();
  reducer.end_backward();
  for (size_t i = 0; i < mlp.params.size(); ++i) EXPECT_FALSE(mlp.params[i].grad().defined()) << i;
  reducer.prepare_for_backward();
  mlp.loss(mlp.params, comm.rank() + comm.size(), /*with_extra=*/false).backward();
  reducer.end_backward();
  reducer.finish(kScale);
  expect_owned(summed_in_one_process(mlp, comm.size(), [&](const auto& p, int q) {
    two_micro_batches(mlp, p, q, comm.size(), nullptr);
  }));
  EXPECT_EQ(reducer.all_reduce_calls(), 0);
  EXPECT_EQ(comm.async_all_reduces(), 0u);
  EXPECT_EQ(comm.collectives(), 3 * reducer.buckets().size());  // a reduce-scatter per bucket
}

TEST(GradientReducer, RunsThatDoNotTileTheParametersAreRefused) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/true);
  auto gap = cut_among(mlp, comm.size());
  gap.back().end -= 1;
  EXPECT_THROW(GradientReducer(mlp.params, comm, 1.0, 1.0, gap), std::invalid_argument);
  auto stranger = cut_among(mlp, comm.size());
  stranger.front().rank = comm.size();
  EXPECT_THROW(GradientReducer(mlp.params, comm, 1.0, 1.0, stranger), std::invalid_argument);
}

TEST(GradientReducer, MisuseIsALogicError) {
  MpiCommunicator comm(MPI_COMM_WORLD);
  Mlp mlp(/*extra_first=*/true);
  GradientReducer reducer(mlp.params, comm, 1100 * kBytes, 300 * kBytes);
  EXPECT_THROW(reducer.end_backward(), std::logic_error);
  EXPECT_THROW(reducer.finish(1.0), std::logic_error);
  reducer.prepare_for_backward();
  mlp.loss(mlp.params, 0, true).backward();
  // A second backward pass in the same reduction would be lost: the hook refuses it.
  EXPECT_THROW(mlp.loss(mlp.params, 0, true).backward(), std::logic_error);
  reducer.end_backward();
  reducer.finish(1.0);
}

}  // namespace
}  // namespace tandem::parallel
