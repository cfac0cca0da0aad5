// Saving a training run's state (CheckpointWriter) and resuming it on every rank (load_everywhere):
// rank 0 writes and reads the file, and every rank ends with its parameters, optimizer state,
// data position, its own RNG stream, the weights' moving average and the keep-best state. Run at
// np 1 and np 2.
#include "trainer/train/resume.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <memory>
#include <vector>

#include "tests/common/mpi_test.h"
#include "tests/common/synthetic_corpus.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/model_io/model_io.h"
#include "trainer/optim/shard_exchange.h"
#include "trainer/train/checkpoint_writer.h"
#include "trainer/train/keep_best.h"
#include "trainer/train/rng.h"

namespace tandem::train {
namespace {

// A corpus in a directory of rank 0's, known to every rank; removed after a final barrier.
class SharedCorpus {
 public:
  SharedCorpus() {
    auto& comm = test::process_group().cpu();
    std::string root;
    if (comm.rank() == 0) {
      dir_ = std::make_unique<TempDir>("resume");
      test::make_reverse_corpus(dir_->path());
      root = dir_->path();
    }
    root_ = comm.broadcast_bytes(root, 0);
    corpus_ = std::make_unique<data::Corpus>(root_ + "/corpus.h5");
  }
  ~SharedCorpus() { test::process_group().cpu().barrier(); }
  const data::Corpus& corpus() const { return *corpus_; }
  std::string run_dir() const { return root_ + "/run"; }

 private:
  std::unique_ptr<TempDir> dir_;
  std::string root_;
  std::unique_ptr<data::Corpus> corpus_;
};

// A small model, its optimizer and the weights' moving average, initialised from `seed`, after
// `steps` Adam updates; with `sharded`, the optimizer state and the average sharded over the
// process group's ranks, each update's pieces shared as the trainer shares them.
struct SmallRun {
  SmallRun(int64_t vocab, uint64_t seed, int steps, bool sharded = false) {
    torch::manual_seed(seed);
    model::TransformerOptions o;
    o.vocab_size = vocab;
    o.d_model = 16;
    o.heads = 2;
    o.encoder_layers = 1;
    o.decoder_layers = 1;
    o.d_ff = 32;
    model = model::Transformer(o);
    const auto named = checkpoint::named_parameters(model);
    auto& comm = test::process_group().cpu();
    const auto shapes = optim::ShardPlan::shapes_of(named);
    adam = std::make_unique<optim::Adam>(
        named, optim::AdamOptions{},
        sharded ? optim::ShardPlan(shapes, comm.size(), comm.rank()) : optim::ShardPlan(shapes));
    ema = std::make_unique<optim::Ema>(adam->plan().owned_slices(named), 0.9);
    for (int s = 0; s < steps; ++s) {
      for (auto p : adam->parameters()) p.mutable_grad() = torch::sin(p.detach() * (s + 2));
      adam->step(1e-2);
      ema->update(s + 1);
      optim::share_updated(adam->plan(), adam->parameters(), comm, 1 << 20);
    }
  }
  model::Transformer model{nullptr};
  std::unique_ptr<optim::Adam> adam;
  std::unique_ptr<optim::Ema> ema;
};

bool equal_tensors(const checkpoint::NamedTensors& a, const checkpoint::NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !torch::equal(a[i].second, b[i].second)) return false;
  }
  return true;
}

bool equal_state(const optim::Adam& a, const optim::Adam& b) {
  const auto sa = a.state(), sb = b.state();
  for (const auto& [group, tensors] : sa) {
    if (!equal_tensors(tensors, sb.at(group))) return false;
  }
  return a.step_count() == b.step_count();
}

config::Config run_config(const SharedCorpus& shared) {
  config::Config c;
  c.data.corpus = shared.corpus().path();
  c.checkpoint.dir = shared.run_dir();
  c.checkpoint.keep_last = 2;
  return c;
}

std::string keep_best_state() {
  KeepBest keep(config::parse_valid_metric("bleu"), 3);
  ValidationResult r;
  r.bleu = 12.5;
  keep.record(6, r);
  return keep.to_json();
}

TEST(Resume, EveryRankGetsRankZerosCheckpoint) {
  auto& comm = test::process_group().cpu();
  SharedCorpus shared;
  const auto vocab = shared.corpus().vocab();
  const config::Config config = run_config(shared);
  if (comm.rank() == 0) std::filesystem::create_directories(config.checkpoint.dir);
  SmallRun saved(vocab.size(), 1, 3);
  torch::manual_seed(100 + comm.rank());  // every rank's own stream, as dropout leaves it
  const std::string my_rng = cpu_rng_state();
  const CheckpointWriter writer(config, vocab.bytes(), "", comm.rank() == 0);
  writer.save(
      RunState{7, saved.model, *saved.adam, saved.ema.get(), 0.25, {2, 13}, keep_best_state()},
      comm, comm);

  SmallRun resumed(vocab.size(), 50 + comm.rank(), 1);  // other weights and moments on every rank
  ASSERT_FALSE(equal_tensors(checkpoint::named_parameters(resumed.model),
                             checkpoint::named_parameters(saved.model)));
  ASSERT_FALSE(equal_tensors(resumed.ema->averages(), saved.ema->averages()));
  const auto point = load_everywhere(
      writer.step_path(7), {},
      {resumed.model, *resumed.adam, resumed.ema.get(), shared.corpus(), ""}, comm, comm);
  EXPECT_TRUE(equal_tensors(checkpoint::named_parameters(resumed.model),
                            checkpoint::named_parameters(saved.model)));
  EXPECT_TRUE(equal_state(*resumed.adam, *saved.adam));
  EXPECT_TRUE(equal_tensors(resumed.ema->averages(), saved.ema->averages()));
  EXPECT_FALSE(equal_tensors(resumed.ema->averages(), checkpoint::named_parameters(saved.model)));
  EXPECT_EQ(point.step, 7);
  EXPECT_EQ(point.world_size, comm.size());
  EXPECT_EQ(point.position.epoch, 2);
  EXPECT_EQ(point.position.next_batch, 13);
  EXPECT_EQ(point.optimizer_step, 3);
  EXPECT_EQ(point.validation, keep_best_state());
  ASSERT_EQ(point.rng.size(), static_cast<size_t>(comm.size()));
  EXPECT_EQ(point.rng[comm.rank()], my_rng);

  torch::manual_seed(999);
  restore_dropout_streams(point, 1, comm.rank(), comm.size(), torch::Device(torch::kCPU));
  EXPECT_EQ(cpu_rng_state(), my_rng);  // the same world size continues each rank's stream
  if (comm.rank() == 0) {
    EXPECT_TRUE(std::filesystem::exists(config.checkpoint.dir + "/last.h5"));
    EXPECT_EQ(checkpoint::load(config.checkpoint.dir + "/last.h5").step, 7);
    EXPECT_EQ(checkpoint::load(writer.step_path(7)).schedule.at("lr"), 0.25);
  }
}

TEST(Resume, ResetOptimizerKeepsTheFreshMomentsAndAnotherWorldReseedsDropout) {
  auto& comm = test::process_group().cpu();
  SharedCorpus shared;
  const auto vocab = shared.corpus().vocab();
  const config::Config config = run_config(shared);
  if (comm.rank() == 0) std::filesystem::create_directories(config.checkpoint.dir);
  SmallRun saved(vocab.size(), 1, 2);
  CheckpointWriter(config, vocab.bytes(), "", comm.rank() == 0)
      .save(RunState{4, saved.model, *saved.adam, saved.ema.get(), 0.1, {}, ""}, comm, comm);

  SmallRun fresh(vocab.size(), 9, 0);
  ResumeOptions options;
  options.reset_optimizer = true;
  auto point =
      load_everywhere(config.checkpoint.dir + "/last.h5", options,
                      {fresh.model, *fresh.adam, fresh.ema.get(), shared.corpus(), ""}, comm, comm);
  EXPECT_TRUE(equal_tensors(checkpoint::named_parameters(fresh.model),
                            checkpoint::named_parameters(saved.model)));
  // Fine-tuning: the average restarts from the weights it starts from.
  EXPECT_TRUE(equal_tensors(fresh.ema->averages(), checkpoint::named_parameters(saved.model)));
  EXPECT_TRUE(equal_state(*fresh.adam, *SmallRun(vocab.size(), 9, 0).adam));  // zeros, step 0
  EXPECT_EQ(point.validation, "");

  point.world_size = comm.size() + 1;  // as if written by another world size
  restore_dropout_streams(point, 5, comm.rank(), comm.size(), torch::Device(torch::kCPU));
  const std::string reseeded = cpu_rng_state();
  torch::manual_seed(dropout_seed(5, comm.rank()) + 4);
  EXPECT_EQ(reseeded, cpu_rng_state());
}

// A sharded run saves what the same run unsharded saves, and that checkpoint resumes into a
// sharded run (each rank's pieces) and an unsharded one (everything) alike.
TEST(Resume, AShardedStateSavesWholeAndResumesShardedOrNot) {
  auto& comm = test::process_group().cpu();
  SharedCorpus shared;
  const auto vocab = shared.corpus().vocab();
  const config::Config config = run_config(shared);
  if (comm.rank() == 0) std::filesystem::create_directories(config.checkpoint.dir);
  SmallRun sharded(vocab.size(), 1, 3, true);
  const SmallRun whole(vocab.size(), 1, 3);
  ASSERT_TRUE(equal_tensors(checkpoint::named_parameters(sharded.model),
                            checkpoint::named_parameters(whole.model)));
  const CheckpointWriter writer(config, vocab.bytes(), "", comm.rank() == 0);
  writer.save(RunState{3, sharded.model, *sharded.adam, sharded.ema.get(), 0.5, {}, ""}, comm,
              comm);
  if (comm.rank() == 0) {
    const auto saved = checkpoint::load(writer.step_path(3));
    EXPECT_TRUE(equal_tensors(saved.ema, whole.ema->averages()));
    EXPECT_TRUE(equal_tensors(saved.optimizer.at("exp_avg"), whole.adam->state().at("exp_avg")));
    EXPECT_TRUE(
        equal_tensors(saved.optimizer.at("exp_avg_sq"), whole.adam->state().at("exp_avg_sq")));
    EXPECT_EQ(saved.optimizer_step, 3);
  }
  for (const bool shard : {true, false}) {
    SmallRun resumed(vocab.size(), 60 + comm.rank(), 1, shard);
    load_everywhere(writer.step_path(3), {},
                    {resumed.model, *resumed.adam, resumed.ema.get(), shared.corpus(), ""}, comm,
                    comm);
    EXPECT_TRUE(equal_tensors(checkpoint::named_parameters(resumed.model),
                              checkpoint::named_parameters(whole.model)));
    const auto expected_ema = resumed.adam->plan().owned_slices(whole.ema->averages());
    EXPECT_TRUE(equal_tensors(resumed.ema->averages(), expected_ema)) << "sharded " << shard;
    const auto expected_avg =
        resumed.adam->plan().owned_slices(whole.adam->state().at("exp_avg_sq"));
    EXPECT_TRUE(equal_tensors(resumed.adam->state().at("exp_avg_sq"), expected_avg))
        << "sharded " << shard;
    EXPECT_EQ(resumed.adam->step_count(), 3);
  }
}

// Errors are raised on rank 0, which reads the file; the job then ends (tandem-train aborts
// every rank), so they are checked in a world of one.
TEST(Resume, RefusesAnotherVocabularyAMissingOptimizerStateAndAMisfitAverage) {
  auto& comm = test::process_group().cpu();
  if (comm.size() != 1) GTEST_SKIP() << "rank 0's errors end the whole job; checked at np 1";
  SharedCorpus shared;
  const auto vocab = shared.corpus().vocab();
  SmallRun run(vocab.size(), 1, 1);
  checkpoint::CheckpointData data;
  data.model = checkpoint::named_parameters(run.model);
  data.vocab = vocab.bytes();
  data.config_yaml = config::to_yaml(run_config(shared));
  std::filesystem::create_directories(shared.run_dir());
  const std::string averaged = shared.run_dir() + "/averaged.h5";
  checkpoint::save(averaged, data);
  data.optimizer = run.adam->state();
  data.ema = checkpoint::named_parameters(run.model);
  data.ema.pop_back();                                // one parameter's average missing
  data.ema.emplace_back("extra", torch::zeros({2}));  // and one the model does not have
  const std::string misfit = shared.run_dir() + "/misfit.h5";
  checkpoint::save(misfit, data);
  data.ema.clear();
  data.vocab = "another vocabulary";
  const std::string other = shared.run_dir() + "/other.h5";
  checkpoint::save(other, data);
  const ResumeTarget target{run.model, *run.adam, nullptr, shared.corpus(), ""};
  try {
    load_everywhere(averaged, {}, target, comm, comm);
    ADD_FAILURE() << "resumed without optimizer state";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("--reset-optimizer"), std::string::npos) << e.what();
  }
  try {
    load_everywhere(misfit, {}, {run.model, *run.adam, run.ema.get(), shared.corpus(), ""}, comm,
                    comm);
    ADD_FAILURE() << "resumed with an average that does not fit the model";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(misfit + " /ema"), std::string::npos) << message;
    EXPECT_NE(message.find("missing in the checkpoint"), std::string::npos) << message;
    EXPECT_NE(message.find("not in the model: extra"), std::string::npos) << message;
  }
  try {
    load_everywhere(other, {}, target, comm, comm);
    ADD_FAILURE() << "resumed with another vocabulary";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("its vocabulary differs from corpus"), std::string::npos)
        << e.what();
  }
}

TEST(CheckpointWriter, KeepsTheNewestStepFilesAndPointsBestAtAStep) {
  auto& comm = test::process_group().cpu();
  SharedCorpus shared;
  const auto vocab = shared.corpus().vocab();
  const config::Config config = run_config(shared);  // keep_last 2
  if (comm.rank() == 0) std::filesystem::create_directories(config.checkpoint.dir);
  SmallRun run(vocab.size(), 1, 1);
  const CheckpointWriter writer(config, vocab.bytes(), "", comm.rank() == 0);
  for (int64_t step : {10, 20, 30})
    writer.save(RunState{step, run.model, *run.adam, nullptr, 0, {}, ""}, comm, comm);
  if (comm.rank() != 0) return;
  writer.link_best(20);
  EXPECT_EQ(checkpoint::step_files(config.checkpoint.dir),
            (std::vector<std::string>{writer.step_path(30), writer.step_path(20)}));
  EXPECT_EQ(checkpoint::load(config.checkpoint.dir + "/best.h5").step, 20);
  EXPECT_EQ(checkpoint::load(config.checkpoint.dir + "/last.h5").step, 30);
  const auto stored = checkpoint::load(config.checkpoint.dir + "/last.h5");
  EXPECT_EQ(stored.config_yaml, config::to_yaml(config));
  EXPECT_EQ(stored.vocab, vocab.bytes());
  EXPECT_EQ(stored.world_size, comm.size());
}

}  // namespace
}  // namespace tandem::train
