#include "trainer/decode/ensemble.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace tandem::decode {

Ensemble::Ensemble(model::Transformer model) : models_{std::move(model)}, weights_{1.0} {}

Ensemble::Ensemble(std::vector<model::Transformer> models, std::vector<double> weights)
    : models_(std::move(models)), weights_(std::move(weights)) {
  if (models_.empty()) throw std::invalid_argument("an ensemble needs at least one model");
  if (weights_.size() != models_.size()) {
    throw std::invalid_argument("an ensemble of " + std::to_string(models_.size()) +
                                " models got " + std::to_string(weights_.size()) + " weights");
  }
  double sum = 0;
  for (size_t i = 0; i < weights_.size(); ++i) {
    if (!(weights_[i] > 0) || !std::isfinite(weights_[i])) {
      throw std::invalid_argument("ensemble weight " + std::to_string(i + 1) + " = " +
                                  std::to_string(weights_[i]) + ": expected > 0 and finite");
    }
    sum += weights_[i];
  }
  for (auto& weight : weights_) weight /= sum;
  for (size_t i = 1; i < models_.size(); ++i) {
    if (models_[i]->options().vocab_size != vocab_size()) {
      throw std::invalid_argument("ensemble model " + std::to_string(i + 1) + " has " +
                                  std::to_string(models_[i]->options().vocab_size) +
                                  " output tokens, model 1 has " + std::to_string(vocab_size()) +
                                  ": an ensemble's models must share one vocabulary");
    }
  }
}

int64_t Ensemble::max_positions() const {
  int64_t out = models_.front()->options().max_positions;
  for (const auto& model : models_) out = std::min(out, model->options().max_positions);
  return out;
}

torch::Device Ensemble::device() const {
  auto params = models_.front()->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

void Ensemble::eval() const {
  for (auto model : models_) model->eval();
}

torch::Tensor combine_log_probs(const std::vector<torch::Tensor>& logits,
                                const std::vector<double>& weights) {
  if (logits.size() == 1) return logits.front();
  torch::Tensor sum;
  for (size_t i = 0; i < logits.size(); ++i) {
    auto term = torch::log_softmax(logits[i].to(torch::kFloat), -1) * weights[i];
    sum = sum.defined() ? sum + term : term;
  }
  return sum;
}

}  // namespace tandem::decode
