// The step's one small all-reduce and the ranks' consistency checks, at np 1 and np 2: sums are
// sums over ranks, one rank's vote decides for all, and a rank that differs is named.
#include "trainer/train/agreement.h"

#include <gtest/gtest.h>

#include "tests/common/mpi_test.h"
#include "trainer/train/rank_checks.h"

namespace tandem::train {
namespace {

TEST(Agreement, TargetsAreSummedOverRanksAndAnyRanksVoteCounts) {
  auto& comm = test::process_group().cpu();
  const int n = comm.size(), r = comm.rank();
  const StepVotes votes{/*stop=*/r == n - 1, /*save=*/false};
  const Agreement agreed = agree_across_ranks(100.0 * (r + 1), votes, comm);
  EXPECT_EQ(agreed.tgt_tokens, 100.0 * n * (n + 1) / 2);
  EXPECT_TRUE(agreed.votes.stop);
  EXPECT_FALSE(agreed.votes.save);
  EXPECT_TRUE(agree_across_ranks(0, StepVotes{false, r == 0}, comm).votes.save);
}

TEST(RankChecks, EqualParametersPassAndADifferentRankIsNamed) {
  auto& comm = test::process_group().cpu();
  std::vector<torch::Tensor> params = {torch::arange(12, torch::kFloat).view({3, 4}),
                                       torch::ones({5})};
  EXPECT_NO_THROW(check_parameters_agree(params, 5, comm));
  EXPECT_NO_THROW(check_same_layout({{"a", params[0]}, {"b", params[1]}}, comm));
  if (comm.size() < 2) return;
  if (comm.rank() == 1) params[1][2] = 1.0f + 1e-7f;  // one bit, on one rank
  try {
    check_parameters_agree(params, 5, comm);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()),
              "step 5: parameters of rank(s) 1 differ from rank 0's; stopping");
  }
  const std::string name = comm.rank() == 1 ? "b.renamed" : "b";
  EXPECT_THROW(check_same_layout({{"a", params[0]}, {name, params[1]}}, comm), std::runtime_error);
}

}  // namespace
}  // namespace tandem::train
