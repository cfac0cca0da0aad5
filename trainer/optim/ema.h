// An exponential moving average of the parameters (Marian's --exponential-smoothing, fairseq's
// --ema-decay), kept alike on every rank without communication.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tandem::optim {

// An exponential moving average of the parameters (Polyak averaging), the smoothed weights that
// Marian keeps with --exponential-smoothing and fairseq with --ema-decay. After every update
//   average ← d·average + (1 − d)·parameter,   d = min(decay, (1 + t) / (10 + t)),
// with t the number of optimizer steps taken: the second term lets the first steps count while the
// average is young (as TensorFlow's ExponentialMovingAverage does with num_updates), so a short run
// is not dominated by its random initialisation. Every rank holds the same parameters after a step,
// so every rank keeps the same average without communicating; with the optimizer state sharded,
// a rank averages only its pieces of the parameters (ShardPlan::owned_slices). Averages are fp32,
// on the parameters' device.

class Ema {
 public:
  using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

  // Starts as a copy of `params` (which it keeps references to and follows: parameters, or views
  // of their pieces); decay in (0, 1).
  Ema(const NamedTensors& params, double decay);

  // The weight d of the old average after `step` optimizer steps.
  static double decay_at(double decay, int64_t step);

  // Moves the averages towards the parameters after optimizer step `step` (1 for the first), where
  // `take` (a 0-dim bool tensor, e.g. GradientGate::finite) is true: decided on its device, so a
  // GPU step does not wait for it. A false one leaves the averages bit for bit as they were.
  void update(int64_t step, const torch::Tensor& take);
  void update(int64_t step);  // always

  // The averages restart from the parameters' current values.
  void reset();

  // The averages, parameter name → tensor, in the parameters' order. The tensors are the live
  // buffers: a broadcast into them changes the average.
  const NamedTensors& averages() const { return averages_; }

  // Exchanges the parameters' values with the averages (bit for bit; twice restores both).
  void swap_with_parameters();

  double decay() const { return decay_; }

 private:
  NamedTensors params_;
  NamedTensors averages_;
  double decay_;
};

// The model holds the averages for as long as this lives (validation with the smoothed weights);
// does nothing with a null Ema. `share`, when given, runs after each exchange (collective: with
// sharded averages, each rank's swapped pieces go to the others).
class AveragedWeights {
 public:
  explicit AveragedWeights(Ema* ema, std::function<void()> share = {})
      : ema_(ema), share_(std::move(share)) {
    exchange();
  }
  ~AveragedWeights() { exchange(); }
  AveragedWeights(const AveragedWeights&) = delete;
  AveragedWeights& operator=(const AveragedWeights&) = delete;

 private:
  void exchange() {
    if (!ema_) return;
    ema_->swap_with_parameters();
    if (share_) share_();
  }

  Ema* ema_;
  std::function<void()> share_;
};

}  // namespace tandem::optim
