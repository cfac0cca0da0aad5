// Translation of many sentences at once: sorted by length, cut into batches of batch_tokens
// source tokens, beam-searched (greedy when beam_size is 1) on options.threads threads, returned
// in the input order. The batches do not depend on the thread count, so neither do the results.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/decode/beam.h"

namespace tandem::decode {

// Sentences are token ids without EOS; `rows`: none, or one per sentence (beam_search's RowInput,
// whose stream -1 is the sentence's index in `sources`). → per sentence its options.nbest
// hypotheses, best first.
std::vector<std::vector<Hypothesis>> translate_nbest(
    const Ensemble& ensemble, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options, const std::vector<RowInput>& rows = {});

// The best hypothesis of each sentence (options.nbest is ignored).
std::vector<Hypothesis> translate(const Ensemble& ensemble,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options,
                                  const std::vector<RowInput>& rows = {});

}  // namespace tandem::decode
