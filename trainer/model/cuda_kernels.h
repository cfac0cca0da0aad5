// Tandem's own CUDA kernels on plain pointers and a stream: the token loss of logit rows in one read
// and one write, and column sums (LayerNorm's weight and bias gradients).
#pragma once

#include <cstdint>

namespace tandem::model::cuda {

// Tandem's own CUDA kernels, for what LibTorch spends many passes or a slow kernel on: the
// token loss over a row of logits in one read and one write, and the column sums behind
// LayerNorm's weight and bias gradients. Plain pointers and a stream: gpu_ops.h wraps them for
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
// `arrivals` holds column_stripes(cols) counters, zero before the call.
int64_t column_blocks(int64_t rows);
int64_t column_stripes(int64_t cols);
void column_sums(const void* a, const void* x, const float* mean, const float* rstd,
                 Element element, int64_t rows, int64_t cols, float* sums, float* scaled,
                 float* work, unsigned* arrivals, void* stream);

}  // namespace tandem::model::cuda
