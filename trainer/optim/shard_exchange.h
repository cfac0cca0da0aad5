// Moving a sharded optimizer's pieces between ranks: each owner's updated pieces of the parameters
// to every rank after a step, a parameter's pieces whole to rank 0 for a checkpoint, and a
// checkpoint's whole tensors from rank 0 to the pieces' owners on resume.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/optim/adam.h"
#include "trainer/optim/shard_plan.h"
#include "trainer/parallel/communicator.h"

namespace tandem::optim {

// After an update: every rank receives the other ranks' pieces of `params` (all parameters, in
// the plan's order), in place. An owner's pieces travel together in broadcasts of at most
// `chunk_bytes` (a larger piece alone, without a copy). Nothing happens when the plan is not
// sharded (every rank updated everything).
void share_updated(const ShardPlan& plan, const std::vector<torch::Tensor>& params,
                   parallel::Communicator& comm, int64_t chunk_bytes);

// Collective: the gate (adam.h) of gradients sharded over the ranks, each rank holding `pieces`
// (its own pieces' summed gradients): their squares summed here, then over the ranks, on `device`.
// The norm equals the unsharded one up to float64 rounding (the sums are grouped otherwise).
GradientGate gate_sharded_gradients(const std::vector<torch::Tensor>& pieces, double max_norm,
                                    parallel::Communicator& comm, const torch::Device& device);

// Collective: parameter `param`'s whole tensor assembled on `root` from every rank's `pieces` (one
// per plan.owned(), as Adam::state() or Ema::averages() hold them; of type `options` on every
// rank). On root it is a CPU tensor, a copy (the piece itself when the plan is not sharded);
// elsewhere it is undefined. One parameter at a time, so that a checkpoint of a sharded state
// never holds more than one of its tensors whole.
torch::Tensor gather_param(const ShardPlan& plan, size_t param,
                           const std::vector<torch::Tensor>& pieces,
                           const torch::TensorOptions& options, parallel::Communicator& comm,
                           int root = 0);

// Collective, the reverse: `whole` (parameter `param`'s tensor, any device; defined on root only)
// into every rank's `pieces` (in place, one per plan.owned(), of type `options`) that hold a part
// of it.
void scatter_param(const ShardPlan& plan, size_t param, const torch::Tensor& whole,
                   const std::vector<torch::Tensor>& pieces, const torch::TensorOptions& options,
                   parallel::Communicator& comm, int root = 0);

}  // namespace tandem::optim
