// Translation of many sentences at once: sorted by length, cut into batches of batch_tokens
// source tokens, beam-searched (greedy when beam_size is 1) on options.threads threads, returned
// in the input order. The batches do not depend on the thread count, so neither do the results.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/decode/beam.h"

namespace tandem::decode {

// Sentences are token ids without EOS. → per sentence its options.nbest hypotheses, best first.
// `first_tokens`: none, or per sentence the token its translations start with (beam_search's).
// When sampling, sentence i draws from stream first_stream + i: its index in the whole input.
// `constraints`: none, or per sentence its lexical constraints (beam_search's).
std::vector<std::vector<Hypothesis>> translate_nbest(
    const Ensemble& ensemble, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options, const std::vector<int32_t>& first_tokens = {},
    int64_t first_stream = 0, const std::vector<Constraints>& constraints = {});

// The best hypothesis of each sentence (options.nbest is ignored).
std::vector<Hypothesis> translate(const Ensemble& ensemble,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options,
                                  const std::vector<int32_t>& first_tokens = {},
                                  int64_t first_stream = 0,
                                  const std::vector<Constraints>& constraints = {});

}  // namespace tandem::decode
