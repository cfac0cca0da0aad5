#include "trainer/train/agreement.h"

#include <torch/torch.h>

namespace tandem::train {

Agreement agree_across_ranks(const StepTotals& local, const StepVotes& votes,
                             parallel::Communicator& comm) {
  // One float64 all-reduce for all five: a vote is 1 where cast, and the sum says whether any was.
  auto sums = torch::tensor({local.tgt_tokens, local.nll_sum, local.correct, votes.stop ? 1.0 : 0.0,
                             votes.save ? 1.0 : 0.0},
                            torch::kFloat64);
  comm.all_reduce_sum(sums);
  const auto s = sums.accessor<double, 1>();
  return Agreement{StepTotals{s[0], s[1], s[2]}, StepVotes{s[3] > 0, s[4] > 0}};
}

}  // namespace tandem::train
