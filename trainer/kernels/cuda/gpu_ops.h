// Tandem's CUDA kernels (cuda_kernels.h) on tensors: the token loss of logit rows in place, column
// sums, and LayerNorm (alone or after post-norm's residual add) with column-sum weight and bias
// gradients.
#pragma once

#include <torch/torch.h>

#include <utility>
#include <vector>

namespace tandem::kernels {

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

// relu's backward and the bias gradient under it in one pass: for g (the gradient reaching a
// relu's output) and y (that output), both [rows, cols] of one type, {g where y > 0 else 0, its
// column sums [cols] fp32}. Requires own_kernels_for(g) and (y).
std::pair<torch::Tensor, torch::Tensor> relu_backward_column_sums(const torch::Tensor& g,
                                                                  const torch::Tensor& y);

// layer_norm over the last dimension of a bf16 x on a GPU, with fp32 weight and bias (cast for
// the forward pass) whose gradients are fp32 column sums. Requires own_kernels_for(x).
torch::Tensor layer_norm_own(const torch::Tensor& x, const torch::Tensor& weight,
                             const torch::Tensor& bias, double eps);

// Post-norm's join: LayerNorm(residual + dropout(x, p)) of bf16 GPU rows in one kernel, with fp32
// weight and bias (used rounded to bf16) whose gradients are fp32 column sums; residual gets the
// sum's gradient, x the same through the dropout mask. The mask is drawn from the GPU's generator
// (philox.h), not stored: the backward kernel draws it again. add_layer_norm_own_for says whether
// the kernels take the pair (own_kernels_for both, bf16, one shape, rows a multiple of 8 and at
// most 2,048 wide, 16-byte aligned).
bool add_layer_norm_own_for(const torch::Tensor& residual, const torch::Tensor& x);
torch::Tensor add_layer_norm_own(const torch::Tensor& residual, const torch::Tensor& x,
                                 const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                                 double p);

// Whether the list passes below take these tensors: own_kernels_for each, all fp32 on one GPU.
bool own_list_kernels_for(const std::vector<torch::Tensor>& tensors);

// targets[i] = sources[i] rounded to bf16, for lists of one length: sources fp32 and targets
// bf16, each pair of one size, all contiguous on one GPU; one launch per 64 pairs. Requires
// own_list_kernels_for(sources).
void copy_to_bf16(const std::vector<torch::Tensor>& sources,
                  const std::vector<torch::Tensor>& targets);

// The moving average's step over lists of one length, in one launch per 64 pairs: averages[i] +=
// weight · (values[i] − averages[i]), rounded as three multi-tensor passes would (see
// cuda::moving_average). All fp32 and contiguous on one GPU, weight a 0-dim fp32 there too.
// Requires own_list_kernels_for of both lists.
void moving_average_(const std::vector<torch::Tensor>& averages,
                     const std::vector<torch::Tensor>& values, const torch::Tensor& weight);

}  // namespace tandem::kernels
