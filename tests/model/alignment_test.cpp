// Cross-attention read as alignment and guided alignment's loss, each against a naive loop: the
// mean of the first heads' softmax, the weighted cross-entropy over the links, the read-out of an
// attention module from its own projection weights; and in the model, the loss reaches the chosen
// layer's queries and keys and what is below them, and nothing above.
#include "trainer/model/alignment.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "trainer/model/attention.h"
#include "trainer/model/transformer.h"

namespace tandem::model {
namespace {

// log(mean over the heads read of softmax_k(q_h · k_h / sqrt(d_h))) in double, one number at a
// time.
double naive_log_prob(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& pad,
                      int64_t heads, AlignmentHeads read, int64_t b, int64_t i, int64_t j) {
  const int64_t d_head = q.size(2) / heads;
  const auto q64 = q.detach().to(torch::kDouble), k64 = k.detach().to(torch::kDouble);
  const auto qa = q64.accessor<double, 3>();
  const auto ka = k64.accessor<double, 3>();
  double mean = 0;
  for (int64_t h = read.first; h < read.first + read.heads; ++h) {
    std::vector<double> scores;
    for (int64_t key = 0; key < k.size(1); ++key) {
      double dot = 0;
      for (int64_t c = h * d_head; c < (h + 1) * d_head; ++c) dot += qa[b][i][c] * ka[b][key][c];
      scores.push_back(pad[b][key].item<bool>() ? -INFINITY : dot / std::sqrt(double(d_head)));
    }
    double total = 0;
    for (const double s : scores) total += std::exp(s);
    mean += std::exp(scores[j]) / total / static_cast<double>(read.heads);
  }
  return std::log(mean);
}

TEST(MeanAttentionLogProbs, AreTheLogOfTheHeadsMeanSoftmaxOverUnpaddedKeys) {
  torch::manual_seed(1);
  const auto q = torch::randn({2, 3, 8});
  const auto k = torch::randn({2, 5, 8});
  auto pad = torch::zeros({2, 5}, torch::kBool);
  pad[1][3] = true;
  pad[1][4] = true;
  for (const AlignmentHeads read :
       {AlignmentHeads{0, 1, 0}, AlignmentHeads{0, 3, 0}, AlignmentHeads{0, 4, 0},
        AlignmentHeads{0, 1, 2}, AlignmentHeads{0, 2, 1}}) {
    const auto got = mean_attention_log_probs(q, k, pad, 4, read);
    ASSERT_EQ(got.sizes(), (std::vector<int64_t>{2, 3, 5}));
    for (int64_t b = 0; b < 2; ++b) {
      for (int64_t i = 0; i < 3; ++i) {
        for (int64_t j = 0; j < 5; ++j) {
          const double want = naive_log_prob(q, k, pad, 4, read, b, i, j);
          if (std::isinf(want)) {
            EXPECT_TRUE(std::isinf(got[b][i][j].item<double>())) << b << i << j;
          } else {
            EXPECT_NEAR(got[b][i][j].item<double>(), want, 1e-5)
                << read.first << "+" << read.heads << " " << b << i << j;
          }
        }
      }
    }
  }
}

TEST(AlignmentLossSum, IsEachLinksWeightTimesMinusItsLogProbabilitySummed) {
  torch::manual_seed(2);
  const auto log_probs = torch::log_softmax(torch::randn({2, 4, 6}), 2);
  const auto links = torch::tensor({{0, 0, 1}, {0, 0, 2}, {0, 3, 5}, {1, 2, 0}}, torch::kInt64);
  const auto weights = torch::tensor({0.5F, 0.5F, 1.0F, 1.0F});
  double want = 0;
  for (int64_t n = 0; n < links.size(0); ++n) {
    want -= weights[n].item<double>() *
            log_probs[links[n][0].item<int64_t>()][links[n][1].item<int64_t>()]
                     [links[n][2].item<int64_t>()]
                         .item<double>();
  }
  EXPECT_NEAR(alignment_loss_sum(log_probs, links, weights).item<double>(), want, 1e-5);
}

TEST(BottomUpLayer, CountsNegativeLayersFromTheTopAndRefusesLayersOutsideTheStack) {
  EXPECT_EQ(bottom_up_layer(-1, 6), 5);
  EXPECT_EQ(bottom_up_layer(-6, 6), 0);
  EXPECT_EQ(bottom_up_layer(2, 6), 2);
  EXPECT_THROW(bottom_up_layer(6, 6), std::invalid_argument);
  EXPECT_THROW(bottom_up_layer(-7, 6), std::invalid_argument);
}

// The module's read-out is computed from its own q and k projections, and its output is the
// output without a read-out.
TEST(AttentionReadOut, IsTheMeanAttentionOfItsProjectionsAndLeavesTheOutputAsItIs) {
  torch::manual_seed(3);
  MultiheadAttention attention(MultiheadAttentionOptions{8, 4});
  const auto query = torch::randn({2, 3, 8});
  const auto memory = torch::randn({2, 5, 8});
  auto pad = torch::zeros({2, 5}, torch::kBool);
  pad[0][4] = true;
  const kernels::AttentionMask mask{pad, false};
  torch::Tensor log_probs;
  const AlignmentHeads first_two{0, 2};
  const auto out = attention->forward(query, memory, mask, &first_two, &log_probs);
  EXPECT_TRUE(torch::equal(out, attention->forward(query, memory, mask)));
  const auto params = attention->named_parameters();
  const auto q =
      torch::nn::functional::linear(query, params["q_proj.weight"], params["q_proj.bias"]);
  const auto k =
      torch::nn::functional::linear(memory, params["k_proj.weight"], params["k_proj.bias"]);
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) {  // row 0's key 4 is padding
        EXPECT_NEAR(log_probs[b][i][j].item<double>(),
                    naive_log_prob(q, k, pad, 4, first_two, b, i, j), 1e-5);
      }
    }
  }
  EXPECT_TRUE(std::isinf(log_probs[0][0][4].item<double>()));
}

TransformerOptions small_options() {
  TransformerOptions o;
  o.vocab_size = 23;
  o.d_model = 16;
  o.heads = 4;
  o.encoder_layers = 2;
  o.decoder_layers = 3;
  o.d_ff = 32;
  o.dropout = 0;
  return o;
}

struct GuidedPass {
  TokenLoss loss;
  std::map<std::string, torch::Tensor> grads;
};

// One forward and backward pass of the same model and batch, with the links learnt by `guided`'s
// heads (weight 0: without guided alignment).
GuidedPass guided_pass(const AlignmentHeads& heads, double weight) {
  torch::manual_seed(4);
  Transformer model(small_options());
  model->train();
  torch::manual_seed(5);
  const auto src = torch::randint(4, 23, {2, 6}, torch::kLong);
  const auto tgt = torch::randint(4, 23, {2, 5}, torch::kLong);
  const GuidedAlignment guided{
      heads, weight, torch::tensor({{0, 0, 1}, {0, 0, 2}, {0, 3, 4}, {1, 1, 0}}, torch::kInt64),
      torch::tensor({0.5F, 0.5F, 1.0F, 1.0F})};
  GuidedPass pass{weight > 0
                      ? model->loss(src, tgt.narrow(1, 0, 4), tgt.narrow(1, 1, 4), 0.1, &guided)
                      : model->loss(src, tgt.narrow(1, 0, 4), tgt.narrow(1, 1, 4), 0.1),
                  {}};
  pass.loss.loss_sum.backward();
  for (const auto& item : model->named_parameters()) pass.grads[item.key()] = item.value().grad();
  return pass;
}

TEST(GuidedAlignment, AddsItsWeightedSumToTheLossAndReachesTheChosenHeadsAndWhatIsBelowOnly) {
  const GuidedPass plain = guided_pass({1, 2}, 0);
  const GuidedPass guided = guided_pass({1, 2}, 0.25);
  ASSERT_TRUE(guided.loss.alignment_sum.defined());
  EXPECT_FALSE(plain.loss.alignment_sum.defined());
  EXPECT_GT(guided.loss.alignment_sum.item<double>(), 0);
  EXPECT_NEAR(guided.loss.loss_sum.item<double>(),
              plain.loss.loss_sum.item<double>() + 0.25 * guided.loss.alignment_sum.item<double>(),
              1e-4);
  EXPECT_TRUE(torch::equal(guided.loss.stats, plain.loss.stats)) << "the token figures";
  for (const auto& [name, grad] : plain.grads) {
    const auto& other = guided.grads.at(name);
    const bool above = name.rfind("decoder.layers.2.", 0) == 0 ||
                       name.rfind("output_proj", 0) == 0 ||
                       name.rfind("decoder.layers.1.ffn", 0) == 0 ||
                       name.rfind("decoder.layers.1.cross_attn.v_proj", 0) == 0 ||
                       name.rfind("decoder.layers.1.cross_attn.out_proj", 0) == 0 ||
                       name.rfind("decoder.layers.1.cross_attn_norm", 0) == 0;
    if (above) {
      EXPECT_TRUE(torch::equal(grad, other)) << name << ": above the read-out or beside it";
    } else if (name != "decoder.layers.1.cross_attn.k_proj.bias") {  // a softmax's shift: 0
      EXPECT_FALSE(torch::equal(grad, other)) << name << ": the loss reaches it";
    }
  }
  // Heads 2 and 3 of the layer's queries are not read out: their rows' gradients stay.
  const auto& q_plain = plain.grads.at("decoder.layers.1.cross_attn.q_proj.weight");
  const auto& q_guided = guided.grads.at("decoder.layers.1.cross_attn.q_proj.weight");
  EXPECT_TRUE(torch::equal(q_plain.narrow(0, 8, 8), q_guided.narrow(0, 8, 8)));
  EXPECT_FALSE(torch::equal(q_plain.narrow(0, 0, 8), q_guided.narrow(0, 0, 8)));
}

// With shift, each link of target piece t is read at position t + 1 (where the piece is the
// decoder's input): the loss's alignment sum is the naive sum over the links of the forced
// attention's row t + 1, from a pass of its own (cross_attention).
TEST(GuidedAlignment, ShiftedReadsEachLinkWhereItsPieceIsTheInput) {
  torch::manual_seed(6);
  Transformer model(small_options());
  model->train();  // dropout 0: the same numbers as eval
  torch::manual_seed(7);
  const auto src = torch::randint(4, 23, {2, 6}, torch::kLong);
  const auto tgt = torch::randint(4, 23, {2, 5}, torch::kLong);
  const auto tgt_in = tgt.narrow(1, 0, 4), tgt_out = tgt.narrow(1, 1, 4);
  const auto links =
      torch::tensor({{0, 0, 1}, {0, 0, 2}, {0, 2, 4}, {1, 1, 0}, {1, 2, 5}}, torch::kInt64);
  const auto weights = torch::tensor({0.5F, 0.5F, 1.0F, 1.0F, 1.0F});
  for (const bool shift : {false, true}) {
    const AlignmentHeads heads{2, 2, 0, shift};
    const GuidedAlignment guided{heads, 0.5, links, weights};
    const auto loss = model->loss(src, tgt_in, tgt_out, 0.1, &guided);
    torch::NoGradGuard no_grad;
    const auto log_probs = model->cross_attention(src, tgt_in, heads);
    double want = 0;
    for (int64_t n = 0; n < links.size(0); ++n) {
      want -= weights[n].item<double>() *
              log_probs[links[n][0].item<int64_t>()][links[n][1].item<int64_t>() + (shift ? 1 : 0)]
                       [links[n][2].item<int64_t>()]
                           .item<double>();
    }
    EXPECT_NEAR(loss.alignment_sum.item<double>(), want, 1e-4) << "shift " << shift;
  }
}

}  // namespace
}  // namespace tandem::model
