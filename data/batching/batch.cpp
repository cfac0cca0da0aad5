// make_batch: pads sentence pairs into the int64 tensors the model consumes.
#include "data/batching/batch.h"

#include <algorithm>

namespace tandem::data {

namespace {

// SentencePair::links (source, target piece pairs by target, then source) as Batch::links and
// link_weights.
void add_links(const std::vector<SentencePair>& pairs, Batch& batch) {
  int64_t count = 0;
  for (const SentencePair& pair : pairs) count += static_cast<int64_t>(pair.links.size()) / 2;
  if (count == 0) return;
  batch.links = torch::empty({count, 3}, torch::kInt64);
  batch.link_weights = torch::empty({count}, torch::kFloat);
  auto* link = batch.links.data_ptr<int64_t>();
  auto* weight = batch.link_weights.data_ptr<float>();
  for (size_t row = 0; row < pairs.size(); ++row) {
    const std::vector<int32_t>& links = pairs[row].links;
    for (size_t i = 0; i < links.size();) {  // one target position's links at a time
      size_t end = i;
      while (end < links.size() && links[end + 1] == links[i + 1]) end += 2;
      const float share = 2.0F / static_cast<float>(end - i);
      for (; i < end; i += 2) {
        *link++ = static_cast<int64_t>(row);
        *link++ = links[i + 1];
        *link++ = links[i];
        *weight++ = share;
      }
      ++batch.aligned_targets;
    }
  }
}

}  // namespace

Batch make_batch(const std::vector<SentencePair>& pairs) {
  size_t longest_src = 0, longest_tgt = 0;
  for (const SentencePair& pair : pairs) {
    longest_src = std::max(longest_src, pair.src.size());
    longest_tgt = std::max(longest_tgt, pair.tgt.size());
  }
  const auto rows = static_cast<int64_t>(pairs.size());
  // One extra column for EOS (src, tgt_out) or BOS (tgt_in); an empty batch is [0, 0].
  const int64_t src_len = pairs.empty() ? 0 : static_cast<int64_t>(longest_src) + 1;
  const int64_t tgt_len = pairs.empty() ? 0 : static_cast<int64_t>(longest_tgt) + 1;
  Batch batch;
  batch.src = torch::full({rows, src_len}, kPadId, torch::kInt64);
  batch.tgt_in = torch::full({rows, tgt_len}, kPadId, torch::kInt64);
  batch.tgt_out = torch::full({rows, tgt_len}, kPadId, torch::kInt64);
  auto src = batch.src.accessor<int64_t, 2>();
  auto tgt_in = batch.tgt_in.accessor<int64_t, 2>();
  auto tgt_out = batch.tgt_out.accessor<int64_t, 2>();
  for (int64_t row = 0; row < rows; ++row) {
    const SentencePair& pair = pairs[row];
    const auto n_src = static_cast<int64_t>(pair.src.size());
    const auto n_tgt = static_cast<int64_t>(pair.tgt.size());
    for (int64_t i = 0; i < n_src; ++i) src[row][i] = pair.src[i];
    src[row][n_src] = kEosId;
    tgt_in[row][0] = kBosId;
    for (int64_t i = 0; i < n_tgt; ++i) {
      tgt_in[row][i + 1] = pair.tgt[i];
      tgt_out[row][i] = pair.tgt[i];
    }
    tgt_out[row][n_tgt] = kEosId;
    batch.src_tokens += n_src + 1;
    batch.tgt_tokens += n_tgt + 1;
  }
  batch.sentences = rows;
  add_links(pairs, batch);
  return batch;
}

}  // namespace tandem::data
