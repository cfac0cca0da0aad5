// data.max_tokens: auto, resolved at start-up: the largest batch whose step fits in the GPU's
// memory (as Marian's --mini-batch-fit), 4,096 on a CPU, a resumed run's own value.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/corpus/corpus.h"
#include "trainer/model/transformer.h"
#include "trainer/parallel/communicator.h"
#include "trainer/runtime/device.h"

namespace tandem::train {

// What data.max_tokens: auto becomes, in this order:
//  - resuming, the number the checkpoint's run used (its resolved config), so that the data
//    position names the same batches;
//  - on a CPU, kCpuAutoTokens (a CPU gains nothing from larger batches, and updates come later);
//  - on a GPU, the largest of kFitMaxTokens, kFitMaxTokens / 2, ..., kFitMinTokens tokens per rank
//    for which one training step fits in the memory the device has left once the model, Adam's
//    state and the moving average are in place: a forward and backward pass under the run's
//    precision on a batch of the training split's longest sentences, with an eighth more tokens
//    as headroom for the allocator, that does not run out of memory. The smallest over ranks, so
//    that every rank plans the same batches.
// The learning rate is not changed: a config that asks for auto states its recipe for the batch
// it gets (configs/*.yaml say which).
inline constexpr int64_t kFitMaxTokens = 65536;
inline constexpr int64_t kFitMinTokens = 1024;
inline constexpr int64_t kCpuAutoTokens = 4096;

// The largest of max, max / 2, ... (not below min) for which fits() is true; 0 when none is.
int64_t largest_fitting(int64_t max, int64_t min, const std::function<bool(int64_t)>& fits);

// Whether one training step (forward and backward, as forward_backward runs it) on `tokens`
// tokens of `length`-token sentences fits in what `device` has free: false on the device's
// out-of-memory error. Leaves no gradients behind and hands the allocator's cached blocks back.
bool step_fits(model::Transformer& model, const runtime::DeviceChoice& device, int64_t tokens,
               int64_t length, int64_t vocab_size);

// The value auto resolves to for this rank's run (collective over `comm`: every rank calls it and
// gets the same number); rank 0 logs how it was chosen. `resume_path` is the checkpoint the run
// resumes from ("" when it starts afresh). Throws std::runtime_error when not even kFitMinTokens
// fit.
int64_t fit_max_tokens(model::Transformer& model, const runtime::DeviceChoice& device,
                       const data::Corpus& corpus, const std::string& resume_path,
                       parallel::Communicator& comm);

}  // namespace tandem::train
