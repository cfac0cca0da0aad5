// Sharded optimizer state between ranks (np 2 and 3): after share_updated every rank holds each
// owner's pieces; gather_param puts every rank's pieces of a parameter together on rank 0 and
// scatter_param hands a whole tensor's pieces back to their owners, each checked element for
// element against a value that names the element and its owner.
#include "trainer/optim/shard_exchange.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "tests/common/mpi_test.h"

namespace tandem::optim {
namespace {

const std::vector<std::vector<int64_t>> kShapes = {{300}, {7, 9}, {2000}, {3}, {129, 2}};

// What parameter `param` holds after every owner wrote its pieces: element e of a piece owned by
// rank r is 1000·r + e (for each parameter's flattened elements).
torch::Tensor owners_values(const ShardPlan& plan, size_t param) {
  torch::Tensor expected = torch::empty({plan.numel(param)});
  for (const Piece& piece : plan.pieces()) {
    if (piece.param != param) continue;
    expected.narrow(0, piece.begin, piece.size())
        .copy_(torch::arange(piece.begin, piece.end, torch::kFloat32) + 1000.0 * piece.rank);
  }
  return expected.reshape(plan.shape(param));
}

// Each rank's pieces filled with its values, everything else with -1.
std::vector<torch::Tensor> written_by_owners(const ShardPlan& plan) {
  std::vector<torch::Tensor> params;
  for (size_t i = 0; i < plan.params(); ++i) params.push_back(torch::full(plan.shape(i), -1.0));
  for (const Piece& piece : plan.owned()) {
    ShardPlan::slice(params[piece.param], piece)
        .view({-1})
        .copy_(torch::arange(piece.begin, piece.end, torch::kFloat32) + 1000.0 * piece.rank);
  }
  return params;
}

TEST(ShardExchange, EveryRankGetsEachOwnersUpdatedPiecesWhateverTheChunkSize) {
  parallel::Communicator& comm = test::process_group().cpu();
  const ShardPlan plan(kShapes, comm.size(), comm.rank());
  // 1 byte: a broadcast per piece, in place; 2 KiB: several pieces together; 1 MiB: one per owner.
  for (const int64_t chunk_bytes : {int64_t{1}, int64_t{2048}, int64_t{1} << 20}) {
    const std::vector<torch::Tensor> params = written_by_owners(plan);
    share_updated(plan, params, comm, chunk_bytes);
    for (size_t i = 0; i < params.size(); ++i) {
      EXPECT_TRUE(torch::equal(params[i], owners_values(plan, i)))
          << "parameter " << i << ", chunks of " << chunk_bytes << " bytes";
    }
  }
}

TEST(ShardExchange, PiecesGatherWholeOnRankZeroAndScatterBackToTheirOwners) {
  parallel::Communicator& comm = test::process_group().cpu();
  const ShardPlan plan(kShapes, comm.size(), comm.rank());
  const std::vector<torch::Tensor> params = written_by_owners(plan);
  std::vector<torch::Tensor> pieces;  // as Adam keeps its moments: copies, one per owned piece
  for (const Piece& piece : plan.owned()) {
    pieces.push_back(ShardPlan::slice(params[piece.param], piece).clone());
  }
  for (size_t i = 0; i < plan.params(); ++i) {
    const torch::Tensor whole = gather_param(plan, i, pieces, torch::kFloat32, comm);
    if (comm.rank() == 0) {
      EXPECT_TRUE(torch::equal(whole, owners_values(plan, i))) << "parameter " << i;
    } else {
      EXPECT_FALSE(whole.defined());
    }
  }

  std::vector<torch::Tensor> received;
  for (const auto& piece : pieces) received.push_back(torch::full_like(piece, -7.0));
  for (size_t i = 0; i < plan.params(); ++i) {
    const torch::Tensor source = comm.rank() == 0 ? owners_values(plan, i) * 2 : torch::Tensor();
    scatter_param(plan, i, source, received, torch::kFloat32, comm);
  }
  for (size_t k = 0; k < received.size(); ++k) {
    EXPECT_TRUE(torch::equal(received[k], pieces[k] * 2)) << "piece " << k;
  }
}

TEST(ShardExchange, AnUnshardedPlanGathersRankZerosOwnTensorsAndScattersToEveryRank) {
  parallel::Communicator& comm = test::process_group().cpu();
  const ShardPlan plan(kShapes);
  std::vector<torch::Tensor> mine;
  for (size_t i = 0; i < plan.params(); ++i)
    mine.push_back(torch::full(plan.shape(i), 1.0 * comm.rank()));
  share_updated(plan, mine, comm, 1024);  // nothing to share: every rank updated everything
  EXPECT_TRUE(torch::equal(mine[0], torch::full(plan.shape(0), 1.0 * comm.rank())));
  const torch::Tensor whole = gather_param(plan, 2, mine, torch::kFloat32, comm);
  if (comm.rank() == 0) {
    EXPECT_TRUE(whole.is_same(mine[2]));  // the live tensor itself, no copy
  }
  for (size_t i = 0; i < plan.params(); ++i) {
    const torch::Tensor source =
        comm.rank() == 0 ? torch::full(plan.shape(i), 5.0) : torch::Tensor();
    scatter_param(plan, i, source, mine, torch::kFloat32, comm);
  }
  for (size_t i = 0; i < mine.size(); ++i) {
    EXPECT_TRUE(torch::equal(mine[i], torch::full(plan.shape(i), 5.0))) << "parameter " << i;
  }
}

}  // namespace
}  // namespace tandem::optim
