#include "trainer/decode/translate.h"

#include <algorithm>

#include "data/batch_plan.h"

namespace tandem::decode {
namespace {

// sources[rows[i]] + EOS, right-padded → [rows, longest + 1] int64.
torch::Tensor make_batch(const std::vector<std::vector<int32_t>>& sources,
                         const std::vector<int64_t>& rows) {
  size_t longest = 0;
  for (const int64_t row : rows) longest = std::max(longest, sources[row].size());
  auto batch = torch::full({static_cast<int64_t>(rows.size()), static_cast<int64_t>(longest + 1)},
                           kPadId, torch::kLong);
  auto cell = batch.accessor<int64_t, 2>();
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& sentence = sources[rows[i]];
    for (size_t t = 0; t < sentence.size(); ++t) cell[i][t] = sentence[t];
    cell[i][sentence.size()] = kEosId;
  }
  return batch;
}

}  // namespace

std::vector<std::vector<Hypothesis>> translate_nbest(
    model::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options) {
  validate(options, model->options().vocab_size);
  // Similar lengths batch together, so little compute goes to padding: rows x padded width (EOS
  // included) stays within batch_tokens.
  std::vector<int64_t> padded(sources.size());
  for (size_t i = 0; i < sources.size(); ++i)
    padded[i] = static_cast<int64_t>(sources[i].size()) + 1;
  std::vector<std::vector<Hypothesis>> results(sources.size());
  for (const auto& rows : data::sorted_batches(padded, options.batch_tokens)) {
    auto hyps = beam_search(model, make_batch(sources, rows), options);
    for (size_t i = 0; i < rows.size(); ++i) results[rows[i]] = std::move(hyps[i]);
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
