// A linear layer's weight and bias gradients from one cuBLASLt product, the bias gradient summed
// in the product's epilogue rather than by a column-sum pass over the layer's output gradient.
#pragma once

#include <torch/torch.h>

namespace tandem::model {

// Whether the environment says TANDEM_BIAS_GRADIENTS=epilogue (the bias gradients of the bf16
// linear layers on a GPU from cuBLASLt's epilogue); unset or `kernel`: from Tandem's column-sum
// kernel. Anything else is refused, naming it.
bool epilogue_bias_gradients_chosen();

// For g [rows, out] and x [rows, in], bf16, contiguous, on one GPU: dw = gᵀ · x [out, in] and
// db = Σ_rows g [out], both fp32, in one product (cuBLASLt's BGRADB epilogue). Returns false,
// writing nothing, where this build has no cuBLASLt or the shapes or types do not suit it (the
// caller takes its other path).
bool weight_and_bias_gradients(const torch::Tensor& g, const torch::Tensor& x, torch::Tensor& dw,
                               torch::Tensor& db);

}  // namespace tandem::model
