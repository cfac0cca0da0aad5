#include "trainer/decode/translate.h"

#include <algorithm>
#include <numeric>

namespace tandem::decode {
namespace {

// sources[order[begin..end)] + EOS, right-padded → [end - begin, longest + 1] int64.
torch::Tensor make_batch(const std::vector<std::vector<int32_t>>& sources,
                         const std::vector<size_t>& order, size_t begin, size_t end) {
  size_t longest = 0;
  for (size_t i = begin; i < end; ++i) longest = std::max(longest, sources[order[i]].size());
  auto batch = torch::full({static_cast<int64_t>(end - begin), static_cast<int64_t>(longest + 1)},
                           model::kPadId, torch::kLong);
  auto cell = batch.accessor<int64_t, 2>();
  for (size_t i = begin; i < end; ++i) {
    const auto& sentence = sources[order[i]];
    for (size_t t = 0; t < sentence.size(); ++t) cell[i - begin][t] = sentence[t];
    cell[i - begin][sentence.size()] = model::kEosId;
  }
  return batch;
}

}  // namespace

std::vector<std::vector<Hypothesis>> translate_nbest(
    model::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options) {
  validate(options, model->options().vocab_size);
  // Similar lengths batch together, so little compute goes to padding.
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return sources[a].size() < sources[b].size(); });
  std::vector<std::vector<Hypothesis>> results(sources.size());
  size_t begin = 0;
  while (begin < order.size()) {
    // Grow the batch while rows x padded width (EOS included) stays within batch_tokens.
    size_t end = begin + 1;
    while (end < order.size() &&
           static_cast<int64_t>((end - begin + 1) * (sources[order[end]].size() + 1)) <=
               options.batch_tokens) {
      ++end;
    }
    auto hyps = beam_search(model, make_batch(sources, order, begin, end), options);
    for (size_t i = begin; i < end; ++i) results[order[i]] = std::move(hyps[i - begin]);
    begin = end;
  }
  return results;
}

std::vector<Hypothesis> translate(model::Transformer& model,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options) {
  DecodeOptions best = options;
  best.nbest = 1;
  std::vector<Hypothesis> out;
  for (auto& hyps : translate_nbest(model, sources, best)) out.push_back(std::move(hyps.front()));
  return out;
}

}  // namespace tandem::decode
