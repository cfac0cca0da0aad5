// Models that translate together (Marian's --models/--weights): at every step each one scores the
// continuations and search ranks them by the weighted sum of the models' log-probabilities. One
// model with weight 1 is the usual case, and every decoding function takes an Ensemble for it.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "trainer/model/transformer.h"

namespace tandem::decode {

class Ensemble {
 public:
  // One model alone (implicit, so that a model is accepted wherever an ensemble is).
  Ensemble(model::Transformer model);  // NOLINT(google-explicit-constructor)

  // Weights, one per model, must be positive and finite; they are scaled to sum to 1. The models
  // must have one vocabulary size (std::invalid_argument otherwise, naming the model).
  Ensemble(std::vector<model::Transformer> models, std::vector<double> weights);

  const std::vector<model::Transformer>& models() const { return models_; }
  const std::vector<double>& weights() const { return weights_; }
  int64_t vocab_size() const { return models_.front()->options().vocab_size; }
  // The longest sequence every model can read (the smallest position table).
  int64_t max_positions() const;
  torch::Device device() const;  // where the (first) model's parameters are

  // Puts every model in eval mode.
  void eval() const;

 private:
  std::vector<model::Transformer> models_;
  std::vector<double> weights_;
};

// Per-model logits [..., vocab] → Σ weights[i] * log_softmax(logits[i]) in float, which is not
// normalised (a log_softmax of it is the ensemble's distribution); one model's logits come back as
// they are.
torch::Tensor combine_log_probs(const std::vector<torch::Tensor>& logits,
                                const std::vector<double>& weights);

}  // namespace tandem::decode
