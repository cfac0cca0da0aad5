#include "trainer/train/forward_backward.h"

#include "trainer/model/autocast.h"
#include "trainer/model/token_loss.h"

namespace tandem::train {
namespace {

// The micro-batch whose backward pass completes the step's gradients: the last with data (the
// first when none has any).
size_t completing_micro_batch(const std::vector<data::Batch>& batches) {
  size_t last = 0;
  for (size_t m = 0; m < batches.size(); ++m) {
    if (!batches[m].empty()) last = m;
  }
  return last;
}

// Under bf16 autocast when chosen; backward() runs after the guard has ended, as autograd wants.
model::TokenLoss micro_batch_loss(model::Transformer& model, const data::Batch& batch,
                                  const runtime::DeviceChoice& device, double label_smoothing) {
  model::AutocastGuard autocast(device.bf16, device.device);
  // From the loader's page-locked memory on a GPU: the copies queue behind the running work
  // instead of waiting for it (and from the CPU, no copy at all).
  const auto on = [&](const torch::Tensor& t) {
    return t.to(device.device, /*non_blocking=*/true);
  };
  return model->loss(on(batch.src), on(batch.tgt_in), on(batch.tgt_out), label_smoothing);
}

}  // namespace

RankStep forward_backward(model::Transformer& model, const std::vector<data::Batch>& batches,
                          parallel::GradientReducer& reducer, const runtime::DeviceChoice& device,
                          double label_smoothing) {
  RankStep totals;
  torch::Tensor stats;  // [nll sum, tokens, correct] summed on the device
  const size_t completing = completing_micro_batch(batches);
  for (size_t m = 0; m < batches.size(); ++m) {
    if (m == completing) reducer.prepare_for_backward();  // earlier ones accumulate locally
    if (batches[m].empty()) continue;
    const auto loss = micro_batch_loss(model, batches[m], device, label_smoothing);
    loss.loss_sum.backward();
    stats = stats.defined() ? stats + loss.stats : loss.stats;
    totals.tgt_tokens += static_cast<double>(batches[m].tgt_tokens);  // known on the host
  }
  // Buckets not yet sent (unused parameters, or no data here) go now, before the next collective,
  // so every rank issues the same collectives in the same order.
  reducer.end_backward();
  // [nll sum, correct] of [nll sum, tokens, correct], a view: nothing waits for the device.
  totals.token_sums =
      stats.defined()
          ? stats.slice(0, 0, 3, 2)
          : torch::zeros({2}, torch::TensorOptions(device.device).dtype(torch::kFloat64));
  return totals;
}

}  // namespace tandem::train
