#include "trainer/decode/decode_options.h"

#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "data/shortlist/shortlist.h"

namespace tandem::decode {
namespace {

template <typename T>
void require(bool ok, const std::string& field, T value, const std::string& expected) {
  if (!ok) {
    std::ostringstream message;
    message << "DecodeOptions." << field << " = " << value << ": expected " << expected;
    throw std::invalid_argument(message.str());
  }
}

}  // namespace

void check_options(const DecodeOptions& options, int64_t vocab_size) {
  require(options.max_len_a >= 0, "max_len_a", options.max_len_a, ">= 0");
  require(options.min_len >= 0, "min_len", options.min_len, ">= 0");
  require(options.batch_tokens > 0, "batch_tokens", options.batch_tokens, "> 0");
  // Each row's 2K + 2 best tokens, <pad> and <s> among them at worst (best_candidates).
  require(options.beam_size >= 1 && 2 * options.beam_size + 2 <= vocab_size, "beam_size",
          options.beam_size,
          "between 1 and (vocab_size - 2) / 2 = " + std::to_string((vocab_size - 2) / 2));
  require(options.nbest >= 1 && options.nbest <= options.beam_size, "nbest", options.nbest,
          "between 1 and beam_size = " + std::to_string(options.beam_size));
  require(std::isfinite(options.length_penalty), "length_penalty", options.length_penalty,
          "a finite number");
  require(options.threads >= 1, "threads", options.threads, ">= 1");
  require(!options.shortlist || options.shortlist->vocab_size() == vocab_size,
          "shortlist's vocabulary size", options.shortlist ? options.shortlist->vocab_size() : 0,
          "the model's, " + std::to_string(vocab_size));
  if (options.sampling.kind != SamplingKind::kNone) {
    require(options.beam_size == 1, "beam_size", options.beam_size,
            "1 when sampling (a draw is one token per step)");
    require(std::isfinite(options.sampling.temperature) && options.sampling.temperature > 0,
            "sampling.temperature", options.sampling.temperature, "a number above 0");
    require(options.sampling.kind != SamplingKind::kTopK || options.sampling.k >= 1, "sampling.k",
            options.sampling.k, ">= 1");
    require(options.sampling.kind != SamplingKind::kTopP ||
                (options.sampling.p > 0 && options.sampling.p <= 1),
            "sampling.p", options.sampling.p, "in (0, 1]");
  }
}

}  // namespace tandem::decode
