// Tests for batch assembly (data/batching/batch.cpp: padding, the pairs' links) and the sharded
// loader (data/batching/loader.cpp), kept in one file so the data tests compile only one
// translation unit that includes LibTorch.
#include "data/batching/loader.h"

#include <gtest/gtest.h>

#include <map>

#include "tests/data/test_corpus.h"

namespace tandem::data {
namespace {

torch::Tensor rows(const std::vector<std::vector<int64_t>>& values) {
  std::vector<torch::Tensor> tensors;
  for (const auto& row : values) tensors.push_back(torch::tensor(row, torch::kInt64));
  return torch::stack(tensors);
}

TEST(MakeBatch, PadsAndFramesWithEosAndBos) {
  const Batch batch = make_batch({{{5, 6, 7}, {8, 9}}, {{10}, {11, 12, 13}}});
  EXPECT_EQ(batch.src.dtype(), torch::kInt64);
  EXPECT_TRUE(torch::equal(batch.src, rows({{5, 6, 7, kEosId}, {10, kEosId, kPadId, kPadId}})));
  EXPECT_TRUE(torch::equal(batch.tgt_in, rows({{kBosId, 8, 9, kPadId}, {kBosId, 11, 12, 13}})));
  EXPECT_TRUE(torch::equal(batch.tgt_out, rows({{8, 9, kEosId, kPadId}, {11, 12, 13, kEosId}})));
  EXPECT_EQ(batch.sentences, 2);
  EXPECT_EQ(batch.src_tokens, 6);
  EXPECT_EQ(batch.tgt_tokens, 7);
}

TEST(MakeBatch, NoPairsGiveAnEmptyBatch) {
  const Batch batch = make_batch({});
  EXPECT_TRUE(batch.empty());
  EXPECT_EQ(batch.src.sizes(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(batch.tgt_out.numel(), 0);
}

TEST(MakeBatch, LinksBecomeRowsOfRowTargetSourceWeightedByTheirTargetsLinkCount) {
  // Links are source, target pairs by target then source (SentencePair::links).
  const std::vector<SentencePair> pairs = {
      {{5, 6, 7}, {8, 9}, {0, 0, 1, 0, 2, 0, 2, 1}},  // target 0 ← sources 0, 1, 2; 1 ← 2
      {{5}, {8}, {}},                                 // no links: no loss for this pair
      {{5, 6}, {8, 9, 10}, {1, 0, 0, 2, 1, 2}},       // target 0 ← 1; target 2 ← 0, 1
  };
  const Batch batch = make_batch(pairs);
  ASSERT_TRUE(batch.links.defined());
  EXPECT_TRUE(torch::equal(batch.links, torch::tensor({{0, 0, 0},
                                                       {0, 0, 1},
                                                       {0, 0, 2},
                                                       {0, 1, 2},
                                                       {2, 0, 1},
                                                       {2, 2, 0},
                                                       {2, 2, 1}},
                                                      torch::kInt64)));
  const float third = 1.0F / 3.0F;
  EXPECT_TRUE(torch::equal(batch.link_weights,
                           torch::tensor({third, third, third, 1.0F, 1.0F, 0.5F, 0.5F})));
  EXPECT_EQ(batch.aligned_targets, 4);
}

// Every loader test runs without prefetching (0) and with it. A 300-pair corpus, a budget that cuts
// it into a few dozen batches, and a way back from a batch's rows to sentence indices (synthetic
// sources are unique).
class Loader : public ::testing::TestWithParam<int64_t> {  // prefetch_steps
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    corpus_ = new Corpus(testing::prepare_synthetic_corpus(*dir_, testing::synthetic_text(300, 5)));
    const std::vector<SentencePair> all = corpus_->read("train", all_indices());
    for (size_t i = 0; i < all.size(); ++i) index_of_[all[i].src] = static_cast<int64_t>(i);
    ASSERT_EQ(index_of_.size(), all.size());
  }
  static void TearDownTestSuite() {
    delete corpus_;
    delete dir_;
  }
  static std::vector<int64_t> all_indices() {
    std::vector<int64_t> indices(corpus_->size("train"));
    for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int64_t>(i);
    return indices;
  }
  static BatchPlanOptions plan_options() {
    BatchPlanOptions options;
    options.max_tokens = 64;
    options.seed = 7;
    options.pool_batches = 4;
    return options;
  }
  static std::vector<std::vector<int64_t>> plan(int64_t epoch) {
    return make_batch_plan(corpus_->padded_lengths("train"), plan_options(), epoch).batches();
  }
  // Sentence indices of a batch's rows, read back from its src tensor (tokens up to EOS).
  static std::vector<int64_t> sentences_of(const Batch& batch) {
    std::vector<int64_t> sentences;
    for (int64_t r = 0; r < batch.sentences; ++r) {
      std::vector<int32_t> tokens;
      for (int64_t c = 0; batch.src[r][c].item<int64_t>() != kEosId; ++c) {
        tokens.push_back(static_cast<int32_t>(batch.src[r][c].item<int64_t>()));
      }
      sentences.push_back(index_of_.at(tokens));
    }
    return sentences;
  }
  ShardedLoader loader(int rank, int world) const {
    return ShardedLoader(*corpus_, "train", plan_options(), rank, world, GetParam());
  }

  static testing::TempDir* dir_;
  static Corpus* corpus_;
  static std::map<std::vector<int32_t>, int64_t> index_of_;
};

testing::TempDir* Loader::dir_ = nullptr;
Corpus* Loader::corpus_ = nullptr;
std::map<std::vector<int32_t>, int64_t> Loader::index_of_;

TEST_P(Loader, RankTakesPlanEntryNextPlusMicroStepTimesWorldPlusRank) {
  const auto expected_plan = plan(0);
  const int world = 3;
  const int64_t accum = 2;
  ASSERT_GT(expected_plan.size(), 20u);
  for (int rank = 0; rank < world; ++rank) {
    ShardedLoader shard = loader(rank, world);
    EXPECT_EQ(shard.batches_in_epoch(), static_cast<int64_t>(expected_plan.size()));
    for (int64_t next = 0; next < shard.batches_in_epoch(); next += world * accum) {
      const std::vector<Batch> micro = shard.next_step(accum);
      ASSERT_EQ(micro.size(), 2u);
      for (int64_t m = 0; m < accum; ++m) {
        const size_t index = next + m * world + rank;
        const auto expected =
            index < expected_plan.size() ? expected_plan[index] : std::vector<int64_t>{};
        EXPECT_EQ(sentences_of(micro[m]), expected) << "rank " << rank << " batch " << index;
      }
      EXPECT_EQ(shard.position().next_batch, next + world * accum);
    }
    EXPECT_EQ(shard.position().epoch, 0);
    shard.next_step(accum);  // the epoch is used up: this step starts epoch 1
    EXPECT_EQ(shard.position().epoch, 1);
    EXPECT_EQ(shard.position().next_batch, world * accum);
  }
}

TEST_P(Loader, RanksOfWorldTwoTogetherCoverTheEpochPlan) {
  const auto expected_plan = plan(0);
  ShardedLoader rank0 = loader(0, 2), rank1 = loader(1, 2);
  std::vector<std::vector<int64_t>> seen;
  while (rank0.position().next_batch < rank0.batches_in_epoch()) {
    const Batch b0 = rank0.next_step(1).at(0);
    const Batch b1 = rank1.next_step(1).at(0);
    seen.push_back(sentences_of(b0));
    if (!b1.empty()) seen.push_back(sentences_of(b1));
  }
  EXPECT_EQ(seen, expected_plan);
}

TEST_P(Loader, RestoredPositionYieldsTheSameBatches) {
  ShardedLoader original = loader(1, 2);
  const int64_t steps_per_epoch = (original.batches_in_epoch() + 1) / 2;
  for (int64_t s = 0; s < steps_per_epoch - 2; ++s) original.next_step(1);
  const DataPosition saved = original.position();
  ShardedLoader resumed = loader(1, 2);
  resumed.set_position(saved);
  for (int s = 0; s < 5; ++s) {  // crosses into epoch 1
    EXPECT_EQ(sentences_of(resumed.next_step(1).at(0)), sentences_of(original.next_step(1).at(0)))
        << "step " << s;
    EXPECT_EQ(resumed.position().epoch, original.position().epoch);
    EXPECT_EQ(resumed.position().next_batch, original.position().next_batch);
  }
  EXPECT_EQ(original.position().epoch, 1);
}

TEST_P(Loader, PositionFromWorldTwoContinuedAtWorldOneCoversTheRestOfTheEpoch) {
  ShardedLoader rank0 = loader(0, 2), rank1 = loader(1, 2);
  std::vector<int> times_seen(corpus_->size("train"), 0);
  auto count = [&](const Batch& batch) {
    for (const int64_t s : sentences_of(batch)) ++times_seen.at(s);
  };
  for (int step = 0; step < 3; ++step) {  // accum 2: each step uses 4 global batches
    for (const Batch& batch : rank0.next_step(2)) count(batch);
    for (const Batch& batch : rank1.next_step(2)) count(batch);
  }
  EXPECT_EQ(rank0.position().next_batch, rank1.position().next_batch);
  ShardedLoader single = loader(0, 1);
  single.set_position(rank0.position());
  while (single.position().next_batch < single.batches_in_epoch()) {
    for (const Batch& batch : single.next_step(3)) count(batch);
  }
  EXPECT_EQ(single.position().epoch, 0);
  for (size_t s = 0; s < times_seen.size(); ++s) EXPECT_EQ(times_seen[s], 1) << "sentence " << s;
}

TEST_P(Loader, PrefetchingChangesNoBatchNorPosition) {
  ShardedLoader plain(*corpus_, "train", plan_options(), 1, 2, 0);
  ShardedLoader ahead = loader(1, 2);
  for (int step = 0; step < 40; ++step) {  // over two epochs; accum changes on the way
    const int64_t accum = step < 25 ? 2 : 3;
    const auto expected = plain.next_step(accum);
    const auto got = ahead.next_step(accum);
    ASSERT_EQ(got.size(), expected.size());
    for (size_t m = 0; m < got.size(); ++m) {
      EXPECT_EQ(sentences_of(got[m]), sentences_of(expected[m])) << "step " << step;
    }
    EXPECT_EQ(ahead.position().epoch, plain.position().epoch) << "step " << step;
    EXPECT_EQ(ahead.position().next_batch, plain.position().next_batch) << "step " << step;
    EXPECT_EQ(ahead.batches_in_epoch(), plain.batches_in_epoch()) << "step " << step;
  }
  EXPECT_GE(plain.position().epoch, 2);
}

TEST_P(Loader, AnErrorWhileReadingIsThrownByNextStep) {
  BatchPlanOptions bad = plan_options();
  bad.max_tokens = 0;  // make_batch_plan throws, on the prefetch thread when there is one
  ShardedLoader shard(*corpus_, "train", bad, 0, 1, GetParam());
  EXPECT_THROW(shard.next_step(1), std::invalid_argument);
  EXPECT_THROW(shard.next_step(1), std::invalid_argument);  // and again: nothing hangs
  EXPECT_EQ(shard.position().next_batch, 0);
}

INSTANTIATE_TEST_SUITE_P(PrefetchSteps, Loader, ::testing::Values(0, 2),
                         [](const ::testing::TestParamInfo<int64_t>& info) {
                           return "prefetch" + std::to_string(info.param);
                         });

}  // namespace
}  // namespace tandem::data
