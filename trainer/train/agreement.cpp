#include "trainer/train/agreement.h"

#include <torch/torch.h>

namespace tandem::train {

Agreement agree_across_ranks(double tgt_tokens, const StepVotes& votes,
                             parallel::Communicator& comm) {
  // One float64 all-reduce for all three: a vote is 1 where cast, and the sum says whether any was.
  auto sums =
      torch::tensor({tgt_tokens, votes.stop ? 1.0 : 0.0, votes.save ? 1.0 : 0.0}, torch::kFloat64);
  comm.all_reduce_sum(sums);
  const auto s = sums.accessor<double, 1>();
  return Agreement{s[0], StepVotes{s[1] > 0, s[2] > 0}};
}

}  // namespace tandem::train
