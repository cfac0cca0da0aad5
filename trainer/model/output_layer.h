// The output layer: decoder states to vocabulary logits, and in training the same projection
// fused with the loss (model/token_loss.h).
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>

#include "trainer/kernels/cpu/frozen_linear.h"
#include "trainer/model/frozen_base.h"
#include "trainer/model/token_loss.h"

namespace tandem::model {

// The output layer: decoder states to vocabulary logits (x · weightᵀ + bias), and in training the
// same projection fused with the loss, a chunk of rows at a time (model/token_loss.h), so the one
// module that owns the weight and bias computes both. With tied embeddings the weight is the
// embedding matrix, passed in by the Transformer.

// The output layer restricted to some target ids (a shortlist's, for one batch): logits of those
// ids alone, by a product with their rows only; column i of its logits is target id ids()[i].
class RestrictedOutput {
 public:
  // ids [n] int64 sorted, each once; weight [vocab, d] and bias [vocab] the layer's (float).
  RestrictedOutput(const torch::Tensor& ids, const torch::Tensor& weight, const torch::Tensor& bias,
                   std::optional<kernels::InferencePrecision> precision);
  // x [rows, d_model] → logits [rows, ids().size(0)].
  torch::Tensor operator()(const torch::Tensor& x) const;
  const torch::Tensor& ids() const { return ids_; }

 private:
  torch::Tensor ids_;
  std::optional<kernels::FrozenLinear> frozen_;  // frozen models: the rows packed alike
  torch::Tensor weight_, bias_;                  // otherwise: the rows as tensors
};

struct OutputProjectionOptions {
  int64_t d_model = 256;
  int64_t vocab_size = 8000;
  bool own_weight = true;  // false: tied embeddings, the weight is passed to forward() and loss()
};

// Registers "bias" (zeros) always and "weight" (Xavier-uniform) only when it owns it, so a tied
// weight is listed once (as src_embed.weight) in named_parameters().
class OutputProjectionImpl : public torch::nn::Module {
 public:
  explicit OutputProjectionImpl(const OutputProjectionOptions& options);
  // x [..., d_model], tied_weight [vocab, d_model] (ignored when it owns a weight) → logits
  // [..., vocab].
  torch::Tensor forward(const torch::Tensor& x, const HeldWeight& tied_weight);
  // The loss of x's logits against targets [...] (kPadId at padding) without the whole logits
  // tensor: projected_token_loss of this layer's weight and bias.
  TokenLoss loss(const torch::Tensor& x, const HeldWeight& tied_weight,
                 const torch::Tensor& targets, double label_smoothing);
  // From now on forward() runs on a frozen copy of the weight as it is now (see FrozenLinear);
  // loss() stays on the parameters (training).
  void freeze(const HeldWeight& tied_weight, kernels::InferencePrecision precision);
  // This layer for target ids `ids` alone (RestrictedOutput), frozen in the precision freeze()
  // was given, if it was.
  std::shared_ptr<const RestrictedOutput> restricted(const HeldWeight& tied_weight,
                                                     const torch::Tensor& ids) const;

 private:
  // Its own weight, or tied_weight when it has none.
  HeldWeight weight(const HeldWeight& tied_weight) const {
    return weight_.defined() ? held_weight(*this, weight_) : tied_weight;
  }

  torch::Tensor weight_, bias_;
  std::shared_ptr<const kernels::FrozenLinear> frozen_;  // null: the parameters
  std::optional<kernels::InferencePrecision> precision_;  // what freeze() was given
};
TORCH_MODULE(OutputProjection);

}  // namespace tandem::model
