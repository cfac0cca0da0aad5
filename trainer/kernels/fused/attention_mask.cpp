#include "trainer/kernels/fused/attention_mask.h"

namespace tandem::kernels {

torch::Tensor AttentionMask::dense(int64_t q_len, const torch::Device& device) const {
  torch::Tensor forbidden;
  if (key_pad.defined()) forbidden = key_pad.view({key_pad.size(0), 1, 1, key_pad.size(1)});
  if (causal) {
    auto future =
        torch::ones({q_len, q_len}, torch::TensorOptions().dtype(torch::kBool).device(device))
            .triu(1)
            .view({1, 1, q_len, q_len});
    forbidden = forbidden.defined() ? forbidden | future : future;
  }
  return forbidden;
}

}  // namespace tandem::kernels
