#include "trainer/model/alignment.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace tandem::model {

int64_t bottom_up_layer(int64_t layer, int64_t layers) {
  const int64_t index = layer < 0 ? layers + layer : layer;
  if (index < 0 || index >= layers) {
    throw std::invalid_argument("alignment layer " + std::to_string(layer) + ": the decoder has " +
                                std::to_string(layers) + " layers");
  }
  return index;
}

void check_alignment_heads(const AlignmentHeads& read, int64_t layers, int64_t heads) {
  if (read.layer < 0 || read.layer >= layers) {
    throw std::invalid_argument("alignment layer " + std::to_string(read.layer) +
                                ": the model's decoder has layers 0 to " +
                                std::to_string(layers - 1));
  }
  if (read.first < 0 || read.heads < 1 || read.first + read.heads > heads) {
    throw std::invalid_argument("alignment heads " + std::to_string(read.first) + " to " +
                                std::to_string(read.first + read.heads - 1) +
                                ": the model's layers have heads 0 to " +
                                std::to_string(heads - 1));
  }
}

torch::Tensor mean_attention_log_probs(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& key_pad, int64_t heads,
                                       const AlignmentHeads& read) {
  const int64_t count = read.heads;
  // Autocast would make the products bf16: the probabilities of long sources lose their tails.
  c10::impl::ExcludeDispatchKeyGuard no_autocast(
      c10::DispatchKeySet({c10::DispatchKey::AutocastCPU, c10::DispatchKey::AutocastCUDA}));
  const int64_t batch = q.size(0), q_len = q.size(1), k_len = k.size(1);
  const int64_t d_head = q.size(2) / heads;
  // [batch, len, d] → the heads read, [batch, count, len, d_head], in float32.
  const auto first_heads = [&](const torch::Tensor& x, int64_t len) {
    return x.narrow(2, read.first * d_head, count * d_head)
        .reshape({batch, len, count, d_head})
        .transpose(1, 2)
        .to(torch::kFloat);
  };
  auto scores = torch::matmul(first_heads(q, q_len), first_heads(k, k_len).transpose(2, 3)) /
                std::sqrt(static_cast<double>(d_head));  // [batch, count, q_len, k_len]
  if (key_pad.defined()) {
    scores = scores.masked_fill(key_pad.view({batch, 1, 1, k_len}),
                                -std::numeric_limits<float>::infinity());
  }
  const auto log_probs = torch::log_softmax(scores, 3);
  if (count == 1) return log_probs.squeeze(1);
  // log mean_h p_h = logsumexp_h log p_h - log count: no probability rounds to 0 before the log.
  return torch::logsumexp(log_probs, 1) - std::log(static_cast<double>(count));
}

torch::Tensor alignment_loss_sum(const torch::Tensor& log_probs, const torch::Tensor& links,
                                 const torch::Tensor& link_weights) {
  const int64_t tgt_len = log_probs.size(1), src_len = log_probs.size(2);
  const auto flat =
      (links.select(1, 0) * tgt_len + links.select(1, 1)) * src_len + links.select(1, 2);
  const auto picked = log_probs.reshape({-1}).index_select(0, flat);
  return -(picked * link_weights).sum();
}

}  // namespace tandem::model
