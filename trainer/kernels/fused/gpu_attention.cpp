// Attention on a GPU through LibTorch >= 2's fused kernels: SDPA (flash or memory-efficient) for
// cross-attention, and with LibTorch >= 2.11 the memory-efficient kernels called on the packed
// q | k | v rows for self-attention.
#include "trainer/kernels/fused/gpu_attention.h"

#include <torch/version.h>

#include <algorithm>
#include <array>
#include <limits>
#include <stdexcept>
#include <vector>

#include "trainer/kernels/cuda/gpu_ops.h"

namespace tandem::kernels {

#if TORCH_VERSION_MAJOR >= 2
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// LibTorch >= 2 on a GPU: at::scaled_dot_product_attention (flash / memory-efficient kernels).
// Its boolean mask marks what may be seen. Causal self-attention needs no padding mask: padding
// is at the end of every sentence, so the keys a real position may see are all real.
torch::Tensor sdpa(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                   const AttentionMask& mask) {
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 1
  // Causal self-attention in the memory-efficient kernels, which SDPA leaves to flash: over the
  // tens of tokens of a translation batch, flash's backward took 3.3x as long a call on an H100
  // (816 µs against 247 µs for the masked encoder's, base shape, 32,768 tokens) and its forward
  // 1.6x. Head sizes the kernels take unpadded only; TANDEM_KERNELS=aten leaves it to SDPA.
  const int64_t d_head = q.size(-1);
  if (mask.causal && q.is_cuda() && d_head % 8 == 0 && d_head <= 128 && !aten_kernels_only()) {
    const bool grad = torch::GradMode::is_enabled() &&
                      (q.requires_grad() || k.requires_grad() || v.requires_grad());
    return std::get<0>(
        at::_scaled_dot_product_efficient_attention(q, k, v, c10::nullopt, grad, 0.0, true));
  }
#endif
  c10::optional<torch::Tensor> visible;
  if (mask.key_pad.defined() && !mask.causal) {
    visible = mask.key_pad.logical_not().view({mask.key_pad.size(0), 1, 1, mask.key_pad.size(1)});
  }
  return at::scaled_dot_product_attention(q, k, v, visible, 0.0, mask.causal);
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 11)
#define TANDEM_PACKED_SELF_ATTENTION 1
// Self-attention straight from the fused projection's rows: [batch, len, 3 d] holding q | k | v,
// heads side by side, is the memory-efficient kernels' own [batch, len, heads, d_head] layout
// three times over, and so is the context they return ([batch, len, d]). Their backward can write
// the three gradients into one [batch, len, 3, heads, d_head] buffer (LibTorch >= 2.11), which is
// the rows' gradient as it stands; through SDPA and unbind, autograd stacked three separate ones
// into a fresh buffer per layer.

// The three [batch, len, heads, d_head] views of q | k | v rows.
std::array<torch::Tensor, 3> heads_of_rows(const torch::Tensor& rows, int64_t heads) {
  const int64_t d = rows.size(2) / 3;
  const auto parts = rows.view({rows.size(0), rows.size(1), 3, heads, d / heads});
  return {parts.select(2, 0), parts.select(2, 1), parts.select(2, 2)};
}

// The gradient of q | k | v rows from those of the three views: the buffer they share as it
// stands, or (should the kernel have written them apart) the three side by side.
torch::Tensor rows_of_heads(const torch::Tensor& dq, const torch::Tensor& dk,
                            const torch::Tensor& dv) {
  const int64_t batch = dq.size(0), len = dq.size(1), d = dq.size(2) * dq.size(3);
  const std::vector<int64_t> packed{len * 3 * d, 3 * d, dq.size(3), 1};
  const int64_t step = d * static_cast<int64_t>(dq.element_size());
  const auto* at = static_cast<const char*>(dq.data_ptr());
  if (dq.is_alias_of(dk) && dq.is_alias_of(dv) && dq.strides() == packed &&
      dk.strides() == packed && dv.strides() == packed &&
      static_cast<const char*>(dk.data_ptr()) == at + step &&
      static_cast<const char*>(dv.data_ptr()) == at + 2 * step) {
    return dq.as_strided({batch, len, 3 * d}, {len * 3 * d, 3 * d, 1});
  }
  return torch::cat(
      {dq.reshape({batch, len, d}), dk.reshape({batch, len, d}), dv.reshape({batch, len, d})}, 2);
}

// The padding mask as the kernels' additive bias in `type`: 0 or -inf per key, one row per
// sentence (its length rounded up to the kernels' 16-element alignment, then cut back), seen by
// every head and query.
torch::Tensor key_pad_bias(const torch::Tensor& key_pad, int64_t heads, int64_t q_len,
                           torch::ScalarType type) {
  const int64_t batch = key_pad.size(0), len = key_pad.size(1), aligned = (len + 15) / 16 * 16;
  auto bias = torch::zeros({batch, 1, 1, aligned}, key_pad.options().dtype(type)).narrow(3, 0, len);
  bias.masked_fill_(key_pad.view({batch, 1, 1, len}), -std::numeric_limits<double>::infinity());
  return bias.expand({batch, heads, q_len, len});
}

c10::optional<torch::Tensor> bias_or_none(const torch::Tensor& bias) {
  return bias.numel() > 0 ? c10::optional<torch::Tensor>(bias) : c10::nullopt;
}

// The kernels' forward pass over q | k | v rows: {the context [batch, len, heads, d_head], and
// with for_backward what their backward takes (logsumexp, the dropout seed and offset)}.
auto efficient_forward(const torch::Tensor& rows, const torch::Tensor& bias, int64_t heads,
                       bool causal, bool for_backward) {
  const auto [q, k, v] = heads_of_rows(rows, heads);
  return at::_efficient_attention_forward(q, k, v, bias_or_none(bias), c10::nullopt, c10::nullopt,
                                          c10::nullopt, c10::nullopt, 0.0, causal ? 1 : 0,
                                          for_backward);
}

class PackedSelfAttention : public torch::autograd::Function<PackedSelfAttention> {
 public:
  // rows: q | k | v [batch, len, 3 d]; bias: key_pad_bias or an empty tensor (no padding mask).
  // → the context [batch, len, heads, d_head].
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& rows,
                               const torch::Tensor& bias, int64_t heads, bool causal) {
    auto [out, logsumexp, seed, offset, q_len, k_len] =
        efficient_forward(rows, bias, heads, causal, /*for_backward=*/true);
    ctx->save_for_backward({rows, bias, out, logsumexp, seed, offset});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["causal"] = causal;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const auto &rows = saved[0], &bias = saved[1];
    const auto [q, k, v] = heads_of_rows(rows, ctx->saved_data["heads"].toInt());
    const int64_t len = rows.size(1);
    auto [dq, dk, dv, unused] = at::_efficient_attention_backward(
        grads[0].contiguous(), q, k, v, bias_or_none(bias), saved[2], c10::nullopt, c10::nullopt,
        len, len, saved[3], 0.0, saved[4], saved[5], ctx->saved_data["causal"].toBool() ? 1 : 0,
        /*bias_requires_grad=*/false, c10::nullopt, c10::nullopt, c10::nullopt,
        /*shared_storage_dqdkdv=*/true);
    return {rows_of_heads(dq, dk, dv), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

// Whether packed_self_attention takes these rows: a GPU, head sizes the kernels take unpadded.
bool packed_self_attention_applies(const torch::Tensor& rows, int64_t heads) {
  const int64_t d_head = rows.size(2) / 3 / heads;
  return rows.is_cuda() && d_head % 8 == 0 && d_head <= 128 && rows.stride(2) == 1 &&
         rows.is_contiguous() && !aten_kernels_only();
}

// Self-attention of q | k | v rows [batch, len, 3 d] → [batch, len, d]: padded keys hidden unless
// causal (padding ends every sentence, so a real position sees no padding anyway).
torch::Tensor packed_self_attention(const torch::Tensor& rows, int64_t heads,
                                    const AttentionMask& mask) {
  const auto bias = mask.key_pad.defined() && !mask.causal
                        ? key_pad_bias(mask.key_pad, heads, rows.size(1), rows.scalar_type())
                        : torch::empty({0}, rows.options());
  torch::Tensor context;
  if (torch::GradMode::is_enabled() && rows.requires_grad()) {
    context = PackedSelfAttention::apply(rows, bias, heads, mask.causal);
  } else {
    context = std::get<0>(efficient_forward(rows, bias, heads, mask.causal, false));
  }
  return context.flatten(2);
}
#endif

}  // namespace

bool gpu_attention_applies(const torch::Tensor& q_rows) { return q_rows.is_cuda(); }

// The fused kernels launch a grid whose third dimension is the batch, and CUDA caps that at
// 65,535: a bigger batch (short sentences at a large data.max_tokens, or data.max_tokens: auto's
// trial of a size that does not fit) would fail the launch with "invalid argument". Such a batch
// goes through in parts of at most this many sentences; autograd joins their gradients.
constexpr int64_t kMaxKernelBatch = 65535;

torch::Tensor gpu_attention(const torch::Tensor& q_rows, const torch::Tensor& kv, int64_t heads,
                            const AttentionMask& mask) {
  if (q_rows.size(0) > kMaxKernelBatch) {
    std::vector<torch::Tensor> parts;
    for (int64_t first = 0; first < q_rows.size(0); first += kMaxKernelBatch) {
      const int64_t n = std::min(kMaxKernelBatch, q_rows.size(0) - first);
      AttentionMask part_mask{
          mask.key_pad.defined() ? mask.key_pad.narrow(0, first, n) : torch::Tensor(),
          mask.causal};
      parts.push_back(gpu_attention(q_rows.narrow(0, first, n),
                                    kv.defined() ? kv.narrow(0, first, n) : torch::Tensor(), heads,
                                    part_mask));
    }
    return torch::cat(parts);
  }
  const bool self = !kv.defined();
  const int64_t d = self ? q_rows.size(2) / 3 : q_rows.size(2);
#ifdef TANDEM_PACKED_SELF_ATTENTION
  if (self && packed_self_attention_applies(q_rows, heads)) {
    return packed_self_attention(q_rows, heads, mask);
  }
#endif
  // Heads as views of the projections' rows: unbind's backward stacks the three gradients in one
  // pass, where a narrow's backward writes a zeroed copy of the whole rows per part.
  const int64_t batch = q_rows.size(0), d_head = d / heads;
  const auto heads_of = [&](const torch::Tensor& rows, int64_t parts) {
    return rows.reshape({batch, rows.size(1), parts, heads, d_head}).unbind(2);
  };
  torch::Tensor q, k, v;
  if (self) {
    const auto qkv = heads_of(q_rows, 3);
    q = qkv[0], k = qkv[1], v = qkv[2];
  } else {
    const auto both = heads_of(kv, 2);
    q = q_rows.reshape({batch, q_rows.size(1), heads, d_head}), k = both[0], v = both[1];
  }
  // [batch, heads, len, d_head] with the rows' layout: the context comes back in it too.
  auto context = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), mask);
  return context.transpose(1, 2).reshape({batch, q_rows.size(1), d});
}

#else  // LibTorch 1.x: the tensor-op path serves every device

bool gpu_attention_applies(const torch::Tensor&) { return false; }

torch::Tensor gpu_attention(const torch::Tensor&, const torch::Tensor&, int64_t,
                            const AttentionMask&) {
  throw std::logic_error("gpu_attention: this LibTorch has no fused attention kernels");
}

#endif

}  // namespace tandem::kernels
