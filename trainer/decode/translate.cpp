#include "trainer/decode/translate.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <thread>

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

// `given` values for `sentences` sentences: none or one each; std::invalid_argument otherwise.
void check_per_sentence(size_t given, const char* what, size_t sentences) {
  if (given != 0 && given != sentences) {
    throw std::invalid_argument("translate: " + std::to_string(given) + " " + what + " for " +
                                std::to_string(sentences) + " sentences");
  }
}

}  // namespace

std::vector<std::vector<Hypothesis>> translate_nbest(
    const Ensemble& ensemble, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options, const std::vector<int32_t>& first_tokens, int64_t first_stream,
    const std::vector<Constraints>& constraints) {
  validate(options, ensemble.vocab_size());
  check_per_sentence(first_tokens.size(), "first tokens", sources.size());
  check_per_sentence(constraints.size(), "constraint sets", sources.size());
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
      std::vector<int32_t> first;
      std::vector<int64_t> streams;
      std::vector<Constraints> mine;
      for (const int64_t row : rows) {
        if (!first_tokens.empty()) first.push_back(first_tokens[row]);
        if (!constraints.empty()) mine.push_back(constraints[row]);
        streams.push_back(first_stream + row);
      }
      auto hyps = beam_search(ensemble, make_batch(sources, rows), options, first, streams, mine);
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
                                  const DecodeOptions& options,
                                  const std::vector<int32_t>& first_tokens, int64_t first_stream,
                                  const std::vector<Constraints>& constraints) {
  DecodeOptions best = options;
  best.nbest = 1;
  std::vector<Hypothesis> out;
  for (auto& hyps : translate_nbest(ensemble, sources, best, first_tokens, first_stream, constraints))
    out.push_back(std::move(hyps.front()));
  return out;
}

}  // namespace tandem::decode
