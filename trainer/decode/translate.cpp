#include "trainer/decode/translate.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

#include "data/batching/batch_plan.h"

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

// The row inputs of the batch of `rows` (sentence indices): each sentence's, its stream its index
// in the input unless given.
std::vector<RowInput> batch_inputs(const std::vector<RowInput>& inputs,
                                   const std::vector<int64_t>& rows) {
  std::vector<RowInput> out(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    if (!inputs.empty()) out[i] = inputs[rows[i]];
    if (out[i].stream < 0) out[i].stream = rows[i];
  }
  return out;
}

}  // namespace

std::vector<std::vector<Hypothesis>> translate_nbest(
    const Ensemble& ensemble, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options, const std::vector<RowInput>& inputs) {
  check_options(options, ensemble.vocab_size());
  if (!inputs.empty() && inputs.size() != sources.size()) {
    throw std::invalid_argument("translate: " + std::to_string(inputs.size()) + " row inputs for " +
                                std::to_string(sources.size()) + " sentences");
  }
  // Similar lengths batch together, so little compute goes to padding: rows x padded width (EOS
  // included) stays within batch_tokens.
  std::vector<int64_t> padded(sources.size());
  for (size_t i = 0; i < sources.size(); ++i)
    padded[i] = static_cast<int64_t>(sources[i].size()) + 1;
  const auto batches = data::sorted_batches(padded, options.batch_tokens);
  std::vector<std::vector<Hypothesis>> results(sources.size());
  // Each thread takes the next batch when it is done with one, longest sentences first, so that
  // the threads finish close together.
  std::atomic<size_t> taken{0};
  auto work = [&] {
    for (size_t n; (n = taken.fetch_add(1)) < batches.size();) {
      const auto& rows = batches[batches.size() - 1 - n];
      auto hyps =
          beam_search(ensemble, make_batch(sources, rows), options, batch_inputs(inputs, rows));
      for (size_t i = 0; i < rows.size(); ++i) results[rows[i]] = std::move(hyps[i]);
    }
  };
  const auto threads = std::min(static_cast<size_t>(options.threads), batches.size());
  if (threads <= 1) {
    work();
    return results;
  }
  std::vector<std::exception_ptr> errors(threads);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      try {
        work();
      } catch (...) {
        errors[t] = std::current_exception();
        taken = batches.size();  // the others stop after their current batch
      }
    });
  }
  for (auto& worker : workers) worker.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

std::vector<Hypothesis> translate(const Ensemble& ensemble,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options, const std::vector<RowInput>& rows) {
  DecodeOptions best = options;
  best.nbest = 1;
  std::vector<Hypothesis> out;
  for (auto& hyps : translate_nbest(ensemble, sources, best, rows))
    out.push_back(std::move(hyps.front()));
  return out;
}

}  // namespace tandem::decode
