// Multi-head scaled dot-product attention with q/k/v/out projections (q, k and v computed by one
// fused matrix product for self-attention), and its incremental-decoding steps over cached keys
// and values.
#pragma once

#include <torch/torch.h>

#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/model/adapter.h"
#include "trainer/model/alignment.h"
#include "trainer/model/bf16_linear.h"
#include "trainer/kernels/cpu/frozen_linear.h"
#include "trainer/kernels/fused/ops.h"

namespace tandem::model {

struct MultiheadAttentionOptions {
  int64_t d_model = 256;
  int64_t heads = 4;  // must divide d_model
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  explicit MultiheadAttentionImpl(const MultiheadAttentionOptions& options);

  // query [batch, q_len, d_model] attends to key_value [batch, k_len, d_model] → [batch, q_len,
  // d_model]. Self-attention when key_value is query (the same tensor): one fused q|k|v product.
  // With `readout` (cross-attention only), *log_probs becomes the log of the mean attention of
  // its heads, [batch, q_len, k_len] (mean_attention_log_probs: plain tensor operations beside
  // the fused kernel, which keeps no probabilities); its layer is not looked at.
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& key_value,
                        const kernels::AttentionMask& given,
                        const AlignmentHeads* readout = nullptr,
                        torch::Tensor* log_probs = nullptr);
  // Incremental decoding (forward only). The source side, once per sentence: memory [sentences,
  // src_len, d_model] → keys | values [sentences, src_len, 2 d_model].
  torch::Tensor project_kv(const torch::Tensor& memory);
  // Self-attention of the newest position x [rows, d_model]: its key | value is written at
  // cache[r, len] (cache [allocated rows >= rows, capacity, 2 d_model]), then it attends to
  // positions 0..len, position j at cache[cache_rows[r][j], j] (cache_rows [rows, capacity]
  // int32; undefined: at cache[r, j]) → [rows, d_model].
  torch::Tensor step_self(const torch::Tensor& x, const torch::Tensor& cache,
                          const torch::Tensor& cache_rows, int64_t len);
  // Cross-attention of the newest position x [rows, d_model], `width` consecutive rows per
  // sentence, to kv [sentences, src_len, 2 d_model] (project_kv) with pad [sentences, src_len]
  // (true at padding) → [rows, d_model]. With `readout`, *log_probs becomes the log of its heads'
  // mean attention, [rows, src_len].
  torch::Tensor step_cross(const torch::Tensor& x, const torch::Tensor& kv,
                           const torch::Tensor& pad, int64_t width,
                           const AlignmentHeads* readout = nullptr,
                           torch::Tensor* log_probs = nullptr);

  // From now on the projections run on frozen copies of the weights as they are now (FrozenLinear:
  // packed fp32 or int8): for decoding, no gradients. The parameters themselves stay as they are.
  // In int8 forward() also attends row by row (kernels::row_attention; causal attention per
  // sentence, AttentionMask::per_sentence), so that a sentence's int8 translation is the same
  // bytes whatever it is batched with: the last bit that padding changes in a float sum can move
  // an int8 input across a rounding step.
  void freeze(kernels::InferencePrecision precision);

  // LoRA: an adapter beside projection `name` (one of projections()), from now on.
  void add_adapter(const std::string& name, const AdapterOptions& options);
  static const std::vector<std::string>& projections();  // q_proj, k_proj, v_proj, out_proj

 private:
  // Whether the products of x go through the bf16 copies (Bf16Linear): they serve trained
  // weights without adapters.
  bool bf16_path(const torch::Tensor& x) const;
  // x [..., d_model] → q | k | v [..., 3 d_model], one product.
  torch::Tensor project_qkv(const torch::Tensor& x);
  torch::Tensor project_q(const torch::Tensor& x);
  torch::Tensor project_out(const torch::Tensor& context);
  // forward() with the read-out of `readout`'s heads' attention into log_probs.
  torch::Tensor read_out(const torch::Tensor& query, const torch::Tensor& key_value,
                         const kernels::AttentionMask& given, const AlignmentHeads& readout,
                         torch::Tensor& log_probs);
  // forward()'s attention (before project_out) with kernels::row_attention: each query row's
  // bits its own, whatever the batch (int8, non-causal).
  torch::Tensor row_attention(const torch::Tensor& query, const torch::Tensor& key_value,
                              const kernels::AttentionMask& mask);

  // The frozen projections, q | k | v and k | v fused as in training.
  struct FrozenProjections {
    kernels::FrozenLinear qkv, q, kv, out;
  };
  // The same four from bf16 copies of the weights, for training in the bf16 stream on a GPU.
  struct Bf16Projections {
    Bf16Linear qkv, q, kv, out;
  };

  MultiheadAttentionOptions options_;
  torch::nn::Linear q_proj_{nullptr}, k_proj_{nullptr}, v_proj_{nullptr}, out_proj_{nullptr};
  std::shared_ptr<const FrozenProjections> frozen_;  // null: the parameters
  bool batch_invariant_ = false;  // frozen in int8: forward() batch-invariant (row_attention)
  std::unique_ptr<Bf16Projections> bf16_;
  std::array<std::optional<Adapter>, 4> lora_;  // q, k, v, out; none: no adapter
};
TORCH_MODULE(MultiheadAttention);

}  // namespace tandem::model
