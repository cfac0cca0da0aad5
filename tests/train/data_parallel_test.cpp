// Data parallelism is exact: N ranks each taking one batch give the same loss and parameters as one
// process taking all N batches (recomputed here naively on rank 0), and every rank holds bitwise
// the same parameters after every step. With accum_steps = 2, N ranks equal one process taking
// 2N batches per step, the reference that 2N ranks without accumulation are checked against (so
// np 2 with accumulation equals np 4 without, each within 1e-5 of the same computation). Either
// way each step all-reduces each gradient bucket once.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "data/batching/loader.h"
#include "data/corpus/corpus.h"
#include "tests/common/mpi_test.h"
#include "tests/common/synthetic_corpus.h"
#include "trainer/model/token_loss.h"
#include "trainer/model_io/model_io.h"
#include "trainer/optim/adam.h"
#include "trainer/parallel/gradient_reducer.h"
#include "trainer/parallel/mpi_communicator.h"
#include "trainer/train/trainer.h"

namespace tandem::test {
namespace {

config::Config tiny_config(const std::string& corpus, const std::string& run_dir) {
  config::Config c;
  c.model.d_model = 32;
  c.model.heads = 2;
  c.model.encoder_layers = 1;
  c.model.decoder_layers = 1;
  c.model.d_ff = 64;
  c.model.dropout = 0.0;  // the single-process reference cannot reproduce per-rank dropout masks
  c.data.corpus = corpus;
  c.data.max_tokens = 128;
  c.data.seed = 2;
  c.train.lr = 1e-3;
  c.train.clip_norm = 0.5;  // small enough to clip on some steps
  c.train.seed = 3;
  c.checkpoint.dir = run_dir;
  c.checkpoint.every_steps = 0;
  return c;
}

// FNV-1a over the raw bytes of every parameter, in order.
uint64_t parameter_hash(const model::Transformer& model) {
  std::vector<std::string> bytes;
  for (const auto& [name, p] : checkpoint::named_parameters(model)) {
    auto c = p.contiguous();
    bytes.emplace_back(static_cast<const char*>(c.data_ptr()), c.numel() * c.element_size());
  }
  return parallel::stable_hash(bytes);
}

// The same step computed naively in one process: all N batches, gradients summed, divided by the
// global target count, clipped, Adam.
struct Reference {
  Reference(const config::Config& c, const data::Corpus& corpus, int world)
      : loader(corpus, "train", {c.data.max_tokens, c.data.seed, c.data.pool_batches, {}}, 0, 1),
        world(world),
        clip(c.train.clip_norm),
        lr(c.train.lr) {
    torch::manual_seed(c.train.seed);
    model = model::Transformer(checkpoint::model_options(c.model, corpus.vocab().size()));
    adam = std::make_unique<optim::Adam>(
        checkpoint::named_parameters(model),
        optim::AdamOptions{c.train.adam_beta1, c.train.adam_beta2, c.train.adam_eps});
  }
  double step() {
    adam->zero_grad();
    torch::Tensor loss_sum = torch::zeros({}, torch::kFloat64);
    double tokens = 0;
    double nll = 0;
    for (const auto& batch : loader.next_step(world)) {  // world global batches in one process
      if (batch.empty()) continue;
      auto loss = model::token_loss(model->forward(batch.src, batch.tgt_in), batch.tgt_out, 0.0);
      loss.loss_sum.backward();
      tokens += static_cast<double>(loss.counts().tokens);
      nll += loss.counts().nll_sum;
    }
    double squares = 0;  // clipping by the global norm, computed here with plain tensor ops
    for (auto& [name, p] : checkpoint::named_parameters(model)) {
      p.mutable_grad().div_(tokens);
      squares += p.grad().to(torch::kFloat64).square().sum().item<double>();
    }
    const double norm = std::sqrt(squares);
    if (norm > clip) {
      for (auto& [name, p] : checkpoint::named_parameters(model))
        p.mutable_grad().mul_(clip / norm);
    }
    adam->step(lr);
    return nll / tokens;
  }
  data::ShardedLoader loader;
  int world;
  double clip;
  double lr;
  model::Transformer model{nullptr};
  std::unique_ptr<optim::Adam> adam;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Largest |a - b| / max|b| over parameters. Key-projection biases are left out: their exact
// gradient is zero (a per-query constant added to every score cancels in the softmax), so what
// each implementation computes there is round-off, which Adam turns into lr-sized steps of either
// sign. They are checked separately against that bound.
double max_relative_difference(const model::Transformer& a, const model::Transformer& b,
                               double noise_bound) {
  double worst = 0;
  auto pa = checkpoint::named_parameters(a);
  auto pb = checkpoint::named_parameters(b);
  for (size_t i = 0; i < pa.size(); ++i) {
    const double diff = (pa[i].second - pb[i].second).abs().max().item<double>();
    if (ends_with(pa[i].first, "k_proj.bias")) {
      EXPECT_LE(diff, noise_bound) << pa[i].first;
      continue;
    }
    const double scale = std::max(1e-3, pb[i].second.abs().max().item<double>());
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

// Trains 6 steps at this world size with `accum` micro-batches per step, comparing each with the
// one-process reference on world * accum batches per step.
void expect_equal_to_one_process(int64_t accum) {
  auto& group = process_group();
  auto& comm = group.cpu();
  auto& mpi = dynamic_cast<parallel::MpiCommunicator&>(comm);
  std::unique_ptr<TempDir> dir;
  std::string root;
  if (group.rank() == 0) {
    dir = std::make_unique<TempDir>("dp");
    make_reverse_corpus(dir->path());
    root = dir->path();
  }
  root = comm.broadcast_bytes(root, 0);
  auto config = tiny_config(root + "/corpus.h5", root + "/run");
  config.train.accum_steps = accum;
  train::Trainer trainer(config, group);
  data::Corpus corpus(config.data.corpus);
  std::unique_ptr<Reference> reference;
  if (group.rank() == 0) {
    reference = std::make_unique<Reference>(config, corpus, group.size() * static_cast<int>(accum));
  }
  std::vector<torch::Tensor> params;
  for (const auto& [name, p] : checkpoint::named_parameters(trainer.model())) params.push_back(p);
  using parallel::GradientReducer;
  const auto buckets = GradientReducer::plan_buckets(params, GradientReducer::kDefaultBucketCapMb,
                                                     GradientReducer::kDefaultFirstBucketMb);

  for (int step = 1; step <= 6; ++step) {
    const uint64_t all_reduces_before = mpi.async_all_reduces();
    const auto stats = trainer.train_step();
    EXPECT_EQ(mpi.async_all_reduces() - all_reduces_before, buckets.size()) << "step " << step;
    torch::Tensor token_sums = stats.token_sums.clone();  // this rank's: summed here over ranks
    comm.all_reduce_sum(token_sums);
    const auto hashes = comm.all_gather(parameter_hash(trainer.model()));
    for (size_t r = 1; r < hashes.size(); ++r) {
      EXPECT_EQ(hashes[r], hashes[0]) << "rank " << r << " differs from rank 0 after step " << step;
    }
    if (group.rank() != 0) continue;
    const double expected_loss = reference->step();
    const double loss = token_sums[0].item<double>() / stats.tgt_tokens;
    EXPECT_NEAR(loss, expected_loss, 1e-5 * std::abs(expected_loss)) << "step " << step;
    EXPECT_LT(
        max_relative_difference(trainer.model(), reference->model, 2 * step * config.train.lr),
        1e-5)
        << "step " << step;
  }
  comm.barrier();  // rank 0's TempDir outlives every rank's use of the corpus
}

TEST(DataParallel, RanksEqualOneProcessOnTheSameGlobalBatchAndStayBitwiseIdentical) {
  expect_equal_to_one_process(1);
}

TEST(DataParallel, AccumulatingTwoBatchesPerRankEqualsOneProcessOnTwiceTheRanksBatches) {
  expect_equal_to_one_process(2);
}

}  // namespace
}  // namespace tandem::test
