// Tandem's CUDA kernels (cuda_kernels.h) on tensors: the token loss of logit rows in place, column
// sums, and LayerNorm with column-sum weight and bias gradients.
#pragma once

#include <torch/torch.h>

namespace tandem::model {

// Tandem's CUDA kernels (cuda_kernels.h) on tensors: the token loss of a block of logit rows in
// place, column sums, and LayerNorm whose weight and bias gradients come from those column sums.
// Each serves only where own_kernels_for() says so; callers keep their tensor-op path for the rest
// (CPU, builds without CUDA kernels, TANDEM_KERNELS=aten).

// Whether the environment says TANDEM_KERNELS=aten: LibTorch's ops and LibTorch's own choice of
// attention kernel only, for comparing them with Tandem's in one build.
bool aten_kernels_only();

// Whether Tandem's own CUDA kernels take `t`: a contiguous fp32 or bf16 tensor on a GPU, in a
// build that has them, unless the environment says TANDEM_KERNELS=aten (LibTorch's ops only: for
// comparing the two in one build).
bool own_kernels_for(const torch::Tensor& t);
// Whether this build has them and the environment allows them (see own_kernels_for).
bool own_kernels_enabled();

// The loss statistics of rows of logits [n, vocab] and, with weight ([n] fp32), their gradient
// written over them (see cuda::token_loss_rows). The statistics are [n] views to fill (fp32, argmax
// int64); any may be undefined. Requires own_kernels_for(logits).
struct LossRowsOut {
  torch::Tensor lse, target_logit, mean_logit, argmax;
};
void token_loss_rows_(torch::Tensor& logits, const torch::Tensor& targets,
                      const torch::Tensor& weight, double smoothing, const LossRowsOut& out);

// a [rows, cols] → Σ over rows, [cols] fp32. Requires own_kernels_for(a).
torch::Tensor column_sums(const torch::Tensor& a);

// layer_norm over the last dimension of a bf16 x on a GPU, with fp32 weight and bias (cast for
// the forward pass) whose gradients are fp32 column sums. Requires own_kernels_for(x).
torch::Tensor layer_norm_own(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps);

}  // namespace tandem::model
