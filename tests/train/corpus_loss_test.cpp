// Training loss per corpus (a corpus file of several): a micro-batch's figures split by each
// sentence's corpus equal the loss of that corpus's sentences in a batch of their own.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/batching/batch.h"
#include "trainer/model/transformer.h"
#include "trainer/train/forward_backward.h"

namespace tandem::train {
namespace {

model::TransformerOptions small_options() {
  model::TransformerOptions o;
  o.vocab_size = 60;
  o.d_model = 32;
  o.heads = 2;
  o.encoder_layers = 1;
  o.decoder_layers = 1;
  o.d_ff = 64;
  o.dropout = 0.0;
  return o;
}

// Pairs of different lengths, so that the mixed batch pads each more than its own would.
std::vector<data::SentencePair> pairs(int64_t count) {
  std::vector<data::SentencePair> out;
  for (int64_t k = 0; k < count; ++k) {
    data::SentencePair pair;
    for (int64_t i = 0; i < 3 + 2 * k; ++i)
      pair.src.push_back(static_cast<int32_t>(4 + (7 * i + k) % 50));
    for (int64_t i = 0; i < 9 - k; ++i)
      pair.tgt.push_back(static_cast<int32_t>(4 + (5 * i + 3 * k) % 50));
    out.push_back(pair);
  }
  return out;
}

TEST(CorpusLoss, EachCorpusSumsEqualTheLossOfItsSentencesAlone) {
  torch::manual_seed(3);
  model::Transformer model(small_options());
  model->eval();
  const std::vector<data::SentencePair> all = pairs(6);
  const std::vector<int64_t> corpus_of = {0, 2, 2, 0, 2, 0};  // corpus 1 has no sentence here
  data::Batch batch = data::make_batch(all);
  batch.direction = torch::tensor(corpus_of, torch::kInt64);
  const model::TokenLoss loss = model->loss(batch.src, batch.tgt_in, batch.tgt_out, 0.1);
  torch::Tensor sums = torch::zeros({3, 3}, torch::kFloat64);
  add_by_direction(sums, loss, batch);
  add_by_direction(sums, loss, batch);  // adds up: twice the micro-batch

  for (int64_t c = 0; c < 3; ++c) {
    std::vector<data::SentencePair> own;
    for (size_t k = 0; k < all.size(); ++k) {
      if (corpus_of[k] == c) own.push_back(all[k]);
    }
    const double nll = sums[c][0].item<double>(), targets = sums[c][1].item<double>(),
                 correct = sums[c][2].item<double>();
    if (own.empty()) {
      EXPECT_EQ(nll, 0.0);
      EXPECT_EQ(targets, 0.0);
      continue;
    }
    const data::Batch alone = data::make_batch(own);
    const model::TokenCounts expected =
        model->loss(alone.src, alone.tgt_in, alone.tgt_out, 0.1).counts();
    EXPECT_NEAR(nll, 2 * expected.nll_sum, 1e-4 * expected.nll_sum) << "corpus " << c;
    EXPECT_EQ(targets, 2.0 * static_cast<double>(expected.tokens)) << "corpus " << c;
    EXPECT_EQ(correct, 2.0 * static_cast<double>(expected.correct)) << "corpus " << c;
  }
  // The corpora's sums are the batch's.
  const model::TokenCounts whole = loss.counts();
  EXPECT_NEAR(sums.select(1, 0).sum().item<double>(), 2 * whole.nll_sum, 1e-6 * whole.nll_sum);
  EXPECT_EQ(sums.select(1, 1).sum().item<double>(), 2.0 * static_cast<double>(whole.tokens));
}

}  // namespace
}  // namespace tandem::train
