#include "trainer/decode/greedy.h"

namespace tandem::decode {

std::vector<Hypothesis> greedy_decode(model::Transformer& model, const torch::Tensor& src,
                                      const DecodeOptions& options) {
  DecodeOptions greedy = options;
  greedy.beam_size = 1;
  greedy.nbest = 1;
  std::vector<Hypothesis> out;
  for (auto& best : beam_search(model, src, greedy)) out.push_back(std::move(best.front()));
  return out;
}

}  // namespace tandem::decode
