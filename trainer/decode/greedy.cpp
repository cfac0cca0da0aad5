#include "trainer/decode/greedy.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

namespace tandem::decode {
namespace {

using model::kBosId;
using model::kEosId;
using model::kPadId;

void validate(const DecodeOptions& options) {
  if (!(options.max_len_a >= 0)) {
    throw std::invalid_argument("DecodeOptions.max_len_a = " + std::to_string(options.max_len_a) +
                                ": expected >= 0");
  }
  if (options.batch_tokens <= 0) {
    throw std::invalid_argument(
        "DecodeOptions.batch_tokens = " + std::to_string(options.batch_tokens) + ": expected > 0");
  }
}

torch::Device model_device(model::Transformer& model) {
  auto params = model->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

// Per row, the most decoding steps it may take: a * (non-pad source length) + b, at least 1 and
// at most the model's position table.
std::vector<int64_t> step_limits(const torch::Tensor& src, const DecodeOptions& options,
                                 int64_t max_positions) {
  auto lengths = src.ne(kPadId).sum(1).to(torch::kCPU, torch::kLong);
  auto length = lengths.accessor<int64_t, 1>();
  std::vector<int64_t> limits(lengths.size(0));
  for (size_t row = 0; row < limits.size(); ++row) {
    auto limit =
        static_cast<int64_t>(std::floor(options.max_len_a * length[row])) + options.max_len_b;
    limits[row] = std::clamp<int64_t>(limit, 1, max_positions);
  }
  return limits;
}

// Adds one step's choice (next token, its log-probability) to every active row's hypothesis and
// returns the positions, within the active batch, of the rows that go on decoding.
std::vector<int64_t> record_step(const torch::Tensor& next, const torch::Tensor& logp,
                                 const std::vector<int64_t>& active,
                                 const std::vector<int64_t>& limits,
                                 std::vector<Hypothesis>& hyps) {
  auto next_cpu = next.to(torch::kCPU, torch::kLong);
  auto logp_cpu = logp.to(torch::kCPU, torch::kDouble);
  auto token = next_cpu.accessor<int64_t, 1>();
  auto score = logp_cpu.accessor<double, 1>();
  std::vector<int64_t> keep;
  for (size_t j = 0; j < active.size(); ++j) {
    Hypothesis& hyp = hyps[active[j]];
    hyp.score += score[j];
    if (token[j] == kEosId) continue;
    hyp.tokens.push_back(static_cast<int32_t>(token[j]));
    if (static_cast<int64_t>(hyp.tokens.size()) < limits[active[j]]) {
      keep.push_back(static_cast<int64_t>(j));
    }
  }
  return keep;
}

// sources[order[begin..end)] + EOS, right-padded → [end - begin, longest + 1] int64.
torch::Tensor make_batch(const std::vector<std::vector<int32_t>>& sources,
                         const std::vector<size_t>& order, size_t begin, size_t end) {
  size_t longest = 0;
  for (size_t i = begin; i < end; ++i) longest = std::max(longest, sources[order[i]].size());
  auto batch = torch::full({static_cast<int64_t>(end - begin), static_cast<int64_t>(longest + 1)},
                           kPadId, torch::kLong);
  auto cell = batch.accessor<int64_t, 2>();
  for (size_t i = begin; i < end; ++i) {
    const auto& sentence = sources[order[i]];
    for (size_t t = 0; t < sentence.size(); ++t) cell[i - begin][t] = sentence[t];
    cell[i - begin][sentence.size()] = kEosId;
  }
  return batch;
}

}  // namespace

std::vector<Hypothesis> greedy_decode(model::Transformer& model, const torch::Tensor& src_in,
                                      const DecodeOptions& options) {
  validate(options);
  torch::NoGradGuard no_grad;
  const int64_t batch = src_in.size(0);
  std::vector<Hypothesis> hyps(batch);
  if (batch == 0) return hyps;
  auto src = src_in.to(model_device(model), torch::kLong);
  auto limits = step_limits(src, options, model->options().max_positions);
  auto state = model->start_decoding(model->encode(src), src);
  std::vector<int64_t> active(batch);  // original row of each row in the shrinking batch
  std::iota(active.begin(), active.end(), 0);
  auto tokens = torch::full({batch}, kBosId, src.options());
  while (!active.empty()) {
    auto [logp, next] = torch::log_softmax(model->decode_step(tokens, state), -1).max(-1);
    auto keep = record_step(next, logp, active, limits, hyps);
    if (keep.size() < active.size()) {
      // Finished rows leave the batch, so later steps only pay for unfinished sentences.
      auto index = torch::tensor(keep, torch::kLong).to(src.device());
      state.select(index);
      next = next.index_select(0, index);
      std::vector<int64_t> still;
      for (auto j : keep) still.push_back(active[j]);
      active.swap(still);
    }
    tokens = next;
  }
  return hyps;
}

std::vector<Hypothesis> translate(model::Transformer& model,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options) {
  validate(options);
  // Similar lengths batch together, so little compute goes to padding.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<Hypothesis> results(sources.size());
  size_t begin = 0;
  while (begin < order.size()) {
    // Grow the batch while rows x padded width (EOS included) stays within batch_tokens.
    size_t end = begin + 1;
    while (end < order.size() &&
           static_cast<int64_t>((end - begin + 1) * (sources[order[end]].size() + 1)) <=
               options.batch_tokens) {
      ++end;
    }
    auto hyps = greedy_decode(model, make_batch(sources, order, begin, end), options);
    for (size_t i = begin; i < end; ++i) results[order[i]] = std::move(hyps[i - begin]);
    begin = end;
  }
  return results;
}

}  // namespace tandem::decode
