// The forward and backward passes of one step's micro-batches on this rank: gradients accumulate
// in the parameters, and the gradient reducer sums them over ranks during the backward pass that
// completes them (the last micro-batch with data), overlapping communication with computation.
#pragma once

#include <vector>

#include "data/batching/batch.h"
#include "trainer/model/transformer.h"
#include "trainer/parallel/gradient_reducer.h"
#include "trainer/runtime/device.h"

namespace tandem::train {

// One rank's share of a step.
struct RankStep {
  double tgt_tokens = 0;     // targets predicted, from the host-side batches
  torch::Tensor token_sums;  // [summed -log p(target) (no smoothing), targets equal to the argmax
                             //  prediction], float64 on the device, not read by the host
  // [directions, 3]: per direction [summed -log p(target), targets, correct], float64 on the
  // device; undefined for a file of one direction
  torch::Tensor direction_sums;
  // Guided alignment: [summed alignment cross-entropy, aligned target positions], float64 on the
  // device; undefined without it.
  torch::Tensor alignment_sums;
};

// What a step's loss is made of beyond the token loss.
struct LossTerms {
  double label_smoothing = 0;
  // Guided alignment (weight > 0): the batches' links (Batch::links) learnt by these heads.
  double alignment_weight = 0;
  model::AlignmentHeads alignment_heads;
};

// Adds a micro-batch's [summed -log p(target), targets, correct] per direction into `sums`
// [directions, 3] (float64, on the loss's device), each sentence's figures to its
// Batch::direction row.
void add_by_direction(torch::Tensor& sums, const model::TokenLoss& loss, const data::Batch& batch);

// The loss is the summed (not averaged) smoothed cross-entropy, plus the weighted alignment
// loss's sum; the caller scales the reduced gradients by the global target count (so the
// alignment loss is per target token too, as fairseq's and each micro-batch's alone). Returns this rank's sums. Afterwards every gradient
// bucket has been launched (reducer.end_backward()), so the next collective may follow.
// directions > 1 (the batches carry Batch::direction): the sums per direction too, zeros where
// this rank saw none of a direction's pairs, so every rank's have the same shape.
RankStep forward_backward(model::Transformer& model, const std::vector<data::Batch>& batches,
                          parallel::GradientReducer& reducer, const runtime::DeviceChoice& device,
                          const LossTerms& terms, int64_t directions = 0);

}  // namespace tandem::train
