#include "trainer/train/forward_backward.h"

#include "trainer/common/token_ids.h"
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
                                  const runtime::DeviceChoice& device, const LossTerms& terms) {
  model::AutocastGuard autocast(device.bf16, device.device);
  // From the loader's page-locked memory on a GPU: the copies queue behind the running work
  // instead of waiting for it (and from the CPU, no copy at all).
  const auto on = [&](const torch::Tensor& t) {
    return t.to(device.device, /*non_blocking=*/true);
  };
  if (terms.alignment_weight > 0 && batch.links.defined()) {
    const model::GuidedAlignment guided{terms.alignment_heads, terms.alignment_weight,
                                        on(batch.links), on(batch.link_weights)};
    return model->loss(on(batch.src), on(batch.tgt_in), on(batch.tgt_out), terms.label_smoothing,
                       &guided);
  }
  return model->loss(on(batch.src), on(batch.tgt_in), on(batch.tgt_out), terms.label_smoothing);
}

}  // namespace

void add_by_direction(torch::Tensor& sums, const model::TokenLoss& loss, const data::Batch& batch) {
  const int64_t rows = batch.tgt_out.size(0);
  const auto on_device = [&](const torch::Tensor& t) {
    return t.to(sums.device(), /*non_blocking=*/true);
  };
  const auto per_row = [&](const torch::Tensor& per_target) {
    return on_device(per_target).to(torch::kFloat64).view({rows, -1}).sum(1);
  };
  const auto by_row = torch::stack(
      {per_row(loss.target_nll), per_row(batch.tgt_out.ne(kPadId)), per_row(loss.target_correct)},
      1);
  sums.index_add_(0, on_device(batch.direction), by_row);
}

RankStep forward_backward(model::Transformer& model, const std::vector<data::Batch>& batches,
                          parallel::GradientReducer& reducer, const runtime::DeviceChoice& device,
                          const LossTerms& terms, int64_t directions) {
  RankStep totals;
  const auto float64_on_device = torch::TensorOptions(device.device).dtype(torch::kFloat64);
  if (directions > 1) totals.direction_sums = torch::zeros({directions, 3}, float64_on_device);
  torch::Tensor alignment_sum;  // summed on the device, with guided alignment
  double aligned_targets = 0;
  torch::Tensor stats;  // [nll sum, tokens, correct] summed on the device
  const size_t completing = completing_micro_batch(batches);
  for (size_t m = 0; m < batches.size(); ++m) {
    if (reducer.sharded()) {  // every micro-batch reduced to the ranks' shards (same count on all)
      if (m > 0) reducer.end_backward();
      reducer.prepare_for_backward();
    } else if (m == completing) {
      reducer.prepare_for_backward();  // earlier ones accumulate locally
    }
    if (batches[m].empty()) continue;
    const auto loss = micro_batch_loss(model, batches[m], device, terms);
    loss.loss_sum.backward();
    stats = stats.defined() ? stats + loss.stats : loss.stats;
    if (loss.alignment_sum.defined()) {
      alignment_sum =
          alignment_sum.defined() ? alignment_sum + loss.alignment_sum : loss.alignment_sum;
      aligned_targets += static_cast<double>(batches[m].aligned_targets);
    }
    if (totals.direction_sums.defined()) add_by_direction(totals.direction_sums, loss, batches[m]);
    totals.tgt_tokens += static_cast<double>(batches[m].tgt_tokens);  // known on the host
  }
  // Buckets not yet sent (unused parameters, or no data here) go now, before the next collective,
  // so every rank issues the same collectives in the same order.
  reducer.end_backward();
  // [nll sum, correct] of [nll sum, tokens, correct], a view: nothing waits for the device.
  totals.token_sums =
      stats.defined() ? stats.slice(0, 0, 3, 2) : torch::zeros({2}, float64_on_device);
  if (terms.alignment_weight > 0) {  // on every rank, so that the ranks' figures add up
    if (!alignment_sum.defined()) alignment_sum = torch::zeros({}, float64_on_device);
    totals.alignment_sums = torch::stack(
        {alignment_sum, torch::full({}, aligned_targets, float64_on_device)});
  }
  return totals;
}

}  // namespace tandem::train
