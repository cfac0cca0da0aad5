// The shard plan cuts the parameters into pieces that tile each of them exactly, nearly 1/N each,
// on aligned elements; Adam and the moving average over those pieces, one rank at a time, give bit
// for bit what they give over the whole parameters, and a whole state loads into any rank's pieces.
#include "trainer/optim/shard_plan.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/optim/adam.h"
#include "trainer/optim/ema.h"

namespace tandem::optim {
namespace {

using NamedParams = std::vector<std::pair<std::string, torch::Tensor>>;

// Sizes that vectorised kernels do not divide (a tail on every parameter), one large enough to be
// cut several times.
const std::vector<std::vector<int64_t>> kShapes = {{37, 29}, {29}, {1000}, {3, 5, 7}, {1}, {130}};

NamedParams make_params(uint64_t seed) {
  torch::manual_seed(seed);
  NamedParams params;
  for (size_t i = 0; i < kShapes.size(); ++i) {
    params.emplace_back("p" + std::to_string(i), (torch::rand(kShapes[i]) + 1).requires_grad_());
  }
  return params;
}

NamedParams clone(const NamedParams& params) {
  NamedParams copy;
  for (const auto& [name, p] : params) copy.emplace_back(name, p.detach().clone().requires_grad_());
  return copy;
}

void set_grads(const NamedParams& params, int step) {
  for (const auto& [name, p] : params) p.mutable_grad() = torch::cos(p.detach() * (step + 3));
}

int64_t total_elements() {
  int64_t total = 0;
  for (size_t i = 0; i < kShapes.size(); ++i) total += ShardPlan(kShapes).numel(i);
  return total;
}

TEST(ShardPlan, PiecesTileEveryParameterOnAlignedCutsNearlyEvenly) {
  const int64_t total = total_elements();
  for (int ranks = 1; ranks <= 5; ++ranks) {
    const ShardPlan plan(kShapes, ranks, 0);
    std::vector<int64_t> covered(kShapes.size(), 0);
    for (const Piece& piece : plan.pieces()) {
      EXPECT_EQ(piece.begin, covered[piece.param]) << "ranks " << ranks;
      EXPECT_GT(piece.size(), 0);
      EXPECT_EQ(piece.begin % ShardPlan::kPieceAlignment, 0) << "ranks " << ranks;
      covered[piece.param] = piece.end;
    }
    int64_t sum = 0;
    for (size_t i = 0; i < kShapes.size(); ++i) EXPECT_EQ(covered[i], plan.numel(i));
    for (int r = 0; r < ranks; ++r) {
      sum += plan.elements_of(r);
      // Each cut moves a boundary by at most half the alignment; a rank has two boundaries.
      EXPECT_LE(std::abs(plan.elements_of(r) - total / ranks), ShardPlan::kPieceAlignment + 1)
          << "rank " << r << " of " << ranks;
    }
    EXPECT_EQ(sum, total);
  }
  const ShardPlan whole(kShapes);
  EXPECT_FALSE(whole.sharded());
  ASSERT_EQ(whole.pieces().size(), kShapes.size());
  for (const Piece& piece : whole.owned()) {
    EXPECT_EQ(piece.rank, kEveryRank);
    EXPECT_EQ(piece.size(), whole.numel(piece.param));
  }
  EXPECT_EQ(whole.elements_of(3), total);
}

TEST(ShardPlan, SlicesAreViewsOfTheirParameter) {
  const NamedParams params = make_params(1);
  const ShardPlan plan(kShapes, 3, 1);
  for (const auto& [name, slice] : plan.owned_slices(params)) {
    torch::Tensor writable = slice;
    writable.fill_(-5);
  }
  int64_t written = 0;
  for (const auto& [name, p] : params) written += (p.detach() == -5).sum().item<int64_t>();
  EXPECT_EQ(written, plan.elements_of(1));
}

// What shard_exchange does between processes: each rank's updated pieces copied into the others'.
void share_pieces(const std::vector<NamedParams>& copies,
                  const std::vector<std::unique_ptr<Adam>>& adams) {
  torch::NoGradGuard no_grad;
  for (size_t r = 0; r < copies.size(); ++r) {
    for (const Piece& piece : adams[r]->plan().owned()) {
      const torch::Tensor updated = ShardPlan::slice(copies[r][piece.param].second.detach(), piece);
      for (size_t other = 0; other < copies.size(); ++other) {
        ShardPlan::slice(copies[other][piece.param].second.detach(), piece).copy_(updated);
      }
    }
  }
}

// Every rank's Adam and average over its own copy of the same parameters, pieces put together,
// equals the unsharded ones bitwise, over steps that clip.
TEST(ShardPlan, AdamAndTheAverageOverPiecesEqualTheWholeBitwise) {
  const int ranks = 3;
  const NamedParams reference = make_params(2);
  Adam whole_adam(reference, AdamOptions{});
  Ema whole_ema(reference, 0.9);
  std::vector<NamedParams> copies;
  std::vector<std::unique_ptr<Adam>> adams;
  std::vector<std::unique_ptr<Ema>> emas;
  for (int r = 0; r < ranks; ++r) {
    copies.push_back(clone(reference));
    const ShardPlan plan(kShapes, ranks, r);
    adams.push_back(std::make_unique<Adam>(copies[r], AdamOptions{}, plan));
    emas.push_back(std::make_unique<Ema>(plan.owned_slices(copies[r]), 0.9));
  }
  for (int step = 1; step <= 5; ++step) {
    set_grads(reference, step);
    const GradientGate gate = gate_gradients(whole_adam.parameters(), 0.5);
    whole_adam.step(1e-2, gate);
    whole_ema.update(step, gate.finite);
    for (int r = 0; r < ranks; ++r) {
      set_grads(copies[r], step);
      adams[r]->step(1e-2, gate_gradients(adams[r]->parameters(), 0.5));
      emas[r]->update(step);
    }
    share_pieces(copies, adams);
  }
  for (int r = 0; r < ranks; ++r) {
    const ShardPlan& plan = adams[r]->plan();
    const auto moments = adams[r]->state();
    const auto whole_moments = whole_adam.state();
    for (size_t k = 0; k < plan.owned().size(); ++k) {
      const Piece& piece = plan.owned()[k];
      const auto expect = [&](const torch::Tensor& whole, const torch::Tensor& got,
                              const char* what) {
        EXPECT_TRUE(torch::equal(ShardPlan::slice(whole.detach().contiguous(), piece), got))
            << what << " of p" << piece.param << " [" << piece.begin << ", " << piece.end
            << ") on rank " << r;
      };
      expect(reference[piece.param].second,
             ShardPlan::slice(copies[r][piece.param].second.detach(), piece), "weights");
      expect(whole_moments.at("exp_avg")[piece.param].second, moments.at("exp_avg")[k].second,
             "exp_avg");
      expect(whole_moments.at("exp_avg_sq")[piece.param].second, moments.at("exp_avg_sq")[k].second,
             "exp_avg_sq");
      expect(whole_ema.averages()[piece.param].second, emas[r]->averages()[k].second, "average");
    }
    EXPECT_EQ(adams[r]->step_count(), 5);
  }
}

TEST(ShardPlan, AWholeStateLoadsIntoEachRanksPieces) {
  const NamedParams params = make_params(3);
  Adam whole(params, AdamOptions{});
  set_grads(params, 1);
  whole.step(1e-2);
  const ShardPlan plan(kShapes, 2, 1);
  Adam sharded(clone(params), AdamOptions{}, plan);
  sharded.load_state(whole.state(), 9);
  EXPECT_EQ(sharded.step_count(), 9);
  const auto state = sharded.state();
  ASSERT_EQ(state.at("exp_avg").size(), plan.owned().size());
  for (size_t k = 0; k < plan.owned().size(); ++k) {
    const Piece& piece = plan.owned()[k];
    EXPECT_TRUE(
        torch::equal(state.at("exp_avg_sq")[k].second,
                     ShardPlan::slice(whole.state().at("exp_avg_sq")[piece.param].second, piece)));
  }
  // A state that lacks a parameter is refused whole, naming it, and changes nothing.
  auto partial = whole.state();
  partial.at("exp_avg").pop_back();
  partial.at("exp_avg_sq").pop_back();
  EXPECT_THROW(sharded.load_state(partial, 2), std::invalid_argument);
  EXPECT_EQ(sharded.step_count(), 9);
  EXPECT_THROW(Adam(params, AdamOptions{}, ShardPlan({{2, 2}}, 2, 0)), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::optim
