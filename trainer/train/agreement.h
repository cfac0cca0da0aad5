// The one small host all-reduce of every step: target counts and stop/save votes summed over
// ranks, so that every rank normalises alike and acts at the same step.
#pragma once

#include "trainer/parallel/communicator.h"

namespace tandem::train {

// The one small all-reduce of every step, on the host: each rank's target count and votes, added
// over all ranks, so every rank normalises by the global target count and acts on the same
// decisions at the same step. Loss statistics are not in it: they stay on the device until a log
// step sums them (ProgressMeter), so a GPU step never waits for the GPU.

// Decisions any rank may trigger: a signal or rank 0's time limit (stop), rank 0's save clock.
struct StepVotes {
  bool stop = false;
  bool save = false;
};

struct Agreement {
  double tgt_tokens = 0;  // targets predicted (non-pad, EOS included), over all ranks
  StepVotes votes;        // true where any rank voted for it
};

// Collective: every rank calls it once per step, after its backward pass.
Agreement agree_across_ranks(double tgt_tokens, const StepVotes& votes,
                             parallel::Communicator& comm);

}  // namespace tandem::train
