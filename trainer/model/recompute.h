// Activation checkpointing (fairseq's --checkpoint-activations, Chen et al. 2016): a layer runs
// without keeping what its backward pass needs, and runs again inside the backward pass, with the
// random streams it drew from and autocast as they were, so that its gradients are bitwise those of
// the layer run once.
#pragma once

#include <torch/torch.h>

#include <functional>

namespace tandem::model {

// A layer of the form (x, memory) → y; memory may be undefined (an encoder layer).
using LayerFunction =
    std::function<torch::Tensor(const torch::Tensor& x, const torch::Tensor& memory)>;

// layer(x, memory), keeping x and memory alone for the backward pass; there the layer runs again
// (with the CPU generator and, for tensors on a GPU, its generator set back to where they were, and
// autocast as it was) and its own backward follows, which accumulates its parameters' gradients as
// the layer run once would (their hooks included) and passes on those of x and memory. Outside
// gradient mode it is layer(x, memory). When neither x nor memory wants a gradient (below a frozen
// embedding, as LoRA's base), x stands in as a leaf that does, so that the layer's parameters
// still get theirs; its own gradient is made and let go.
torch::Tensor recomputed(const LayerFunction& layer, const torch::Tensor& x,
                         const torch::Tensor& memory);

}  // namespace tandem::model
