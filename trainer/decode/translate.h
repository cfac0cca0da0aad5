// Translation of many sentences at once: sorted by length, cut into batches of batch_tokens
// source tokens, beam-searched (greedy when beam_size is 1), returned in the input order.
#pragma once

#include <cstdint>
#include <vector>

#include "trainer/decode/beam.h"
#include "trainer/model/transformer.h"

namespace tandem::decode {

// Sentences are token ids without EOS. → per sentence its options.nbest hypotheses, best first.
std::vector<std::vector<Hypothesis>> translate_nbest(
    model::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
    const DecodeOptions& options);

// The best hypothesis of each sentence (options.nbest is ignored).
std::vector<Hypothesis> translate(model::Transformer& model,
                                  const std::vector<std::vector<int32_t>>& sources,
                                  const DecodeOptions& options);

}  // namespace tandem::decode
