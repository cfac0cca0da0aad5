// Tandem's own CUDA kernels on plain pointers and a stream: the token loss of logit rows, column
// sums, post-norm's residual add (after dropout) with its LayerNorm, and its backward.
#pragma once

#include <cstdint>

namespace tandem::kernels::cuda {

// Tandem's own CUDA kernels, for what LibTorch spends many passes or a slow kernel on: the
// token loss over a row of logits in one read and one write, the column sums behind the bias and
// LayerNorm weight gradients, and post-norm's residual add (after dropout) with its LayerNorm in
// one pass, its backward in another. Plain pointers and a stream: gpu_ops.h wraps them for
// tensors. Compiled by nvcc only in builds whose LibTorch has CUDA (TANDEM_CUDA_KERNELS).

enum class Element { kFloat, kBFloat16 };

// Per row r of logits [rows, vocab] (contiguous, `element`): lse[r] = log Σ exp, target_logit[r],
// mean_logit[r] and argmax[r] (the first index of the largest logit), in fp32 sums. With
// `weight` (fp32 [rows]), the row is then overwritten by the smoothed loss's gradient
// weight[r] · (softmax − (1 − smoothing) [j = target] − smoothing / vocab).
void token_loss_rows(void* logits, Element element, int64_t rows, int64_t vocab,
                     const int64_t* targets, const float* weight, float smoothing, float* lse,
                     float* target_logit, float* mean_logit, int64_t* argmax, void* stream);

// Column sums of a [rows, cols] (contiguous, `element`) in fp32, in one launch: sums[c] =
// Σ_r a[r, c], and with x, mean and rstd (LayerNorm's input and the statistics of its rows) also
// scaled[c] = Σ_r a[r, c] · (x[r, c] − mean[r]) · rstd[r]. Blocks of rows write partial sums to
// `work` (column_blocks(rows) × cols floats per output); the last block of each stripe of columns
// adds them up in an order fixed by the grid, so the result is the same from run to run.
// `arrivals` holds column_stripes(cols) counters, zero before the call and zero again after it.
int64_t column_blocks(int64_t rows);
int64_t column_stripes(int64_t cols);
void column_sums(const void* a, const void* x, const float* mean, const float* rstd,
                 Element element, int64_t rows, int64_t cols, float* sums, float* scaled,
                 float* work, unsigned* arrivals, void* stream);
// relu's backward with its bias gradient in the same pass: masked = g where y > 0, else 0 (y the
// relu's output, g its incoming gradient, both [rows, cols] `element`), and sums[c] = Σ_r
// masked[r, c]; work and arrivals as column_sums'.
void relu_backward_column_sums(const void* g, const void* y, Element element, int64_t rows,
                               int64_t cols, void* masked, float* sums, float* work,
                               unsigned* arrivals, void* stream);

// Dropout on the way into add_layer_norm: x's elements kept with probability 1 − p and scaled by
// 1 / (1 − p). Run r of 8 elements (the r-th 8 of the rows laid end to end) is decided by
// philox::draw(seed, offset, r) and philox::kept (philox.h), so the backward pass draws the mask
// again rather than keeping it. threshold 0: no dropout.
struct Dropout {
  uint64_t seed = 0, offset = 0;  // LibTorch's CUDA generator's, offset a multiple of 4
  uint32_t threshold = 0;         // p · 65,536 rounded
  float scale = 1.f;              // 1 / (1 − p)
};

// Post-norm's residual join in one pass over bf16 rows [rows, cols] (contiguous, 16-byte aligned):
// sum = residual + dropout(x) (rounded to bf16, as a bf16 add), y = LayerNorm(sum) with fp32
// weight and bias [cols] used rounded to bf16 (as LibTorch's bf16 layer_norm with weights cast to
// bf16), and the fp32 mean and 1/sqrt(var + eps) of every row, for the backward pass.
// add_layer_norm_fits(cols): whether the kernels take rows that wide (a multiple of 8, at most
// 2,048).
bool add_layer_norm_fits(int64_t cols);
void add_layer_norm(const void* residual, const void* x, const float* weight, const float* bias,
                    int64_t rows, int64_t cols, float eps, const Dropout& dropout, void* sum,
                    void* y, float* mean, float* rstd, void* stream);
// Its backward from dy (y's gradient), the sum and its rows' mean and rstd: dsum, the gradient of
// the sum (and so of residual), and with dx (non-null) x's: dsum where dropout kept x, times its
// scale, else 0. All bf16 [rows, cols]; the weight and bias gradients are column sums
// (column_sums with the sum, mean and rstd).
void add_layer_norm_backward(const void* dy, const void* sum, const float* mean, const float* rstd,
                             const float* weight, int64_t rows, int64_t cols,
                             const Dropout& dropout, void* dsum, void* dx, void* stream);

}  // namespace tandem::kernels::cuda
