// The one small all-reduce of every step: each rank's sums and votes, added over all ranks, so
// every rank normalises by the global target count and acts on the same decisions at the same step.
#pragma once

#include "trainer/parallel/communicator.h"

namespace tandem::train {

// Sums over a step's micro-batches (one rank's, or all ranks' once agreed).
struct StepTotals {
  double tgt_tokens = 0;  // targets predicted (non-pad, EOS included)
  double nll_sum = 0;     // summed -log p(target), no smoothing
  double correct = 0;     // targets equal to the argmax prediction
};

// Decisions any rank may trigger: a signal or rank 0's time limit (stop), rank 0's save clock.
struct StepVotes {
  bool stop = false;
  bool save = false;
};

struct Agreement {
  StepTotals totals;  // over all ranks
  StepVotes votes;    // true where any rank voted for it
};

// Collective: every rank calls it once per step, after its backward pass.
Agreement agree_across_ranks(const StepTotals& local, const StepVotes& votes,
                             parallel::Communicator& comm);

}  // namespace tandem::train
