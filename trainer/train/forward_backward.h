// The forward and backward passes of one step's micro-batches on this rank: gradients accumulate
// in the parameters, and the gradient reducer sums them over ranks during the backward pass that
// completes them (the last micro-batch with data), overlapping communication with computation.
#pragma once

#include <vector>

#include "data/batch.h"
#include "trainer/model/transformer.h"
#include "trainer/parallel/gradient_reducer.h"
#include "trainer/train/agreement.h"
#include "trainer/train/device.h"

namespace tandem::train {

// The loss is the summed (not averaged) smoothed cross-entropy; the caller scales the reduced
// gradients by the global target count. Returns this rank's sums. Afterwards every gradient
// bucket has been launched (reducer.end_backward()), so the next collective may follow.
StepTotals forward_backward(model::Transformer& model, const std::vector<data::Batch>& batches,
                            parallel::GradientReducer& reducer, const DeviceChoice& device,
                            double label_smoothing);

}  // namespace tandem::train
