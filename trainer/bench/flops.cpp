#include "trainer/bench/flops.h"

#include <cstdio>
#include <stdexcept>

namespace tandem::bench {

LengthStats length_stats(const std::vector<int32_t>& src_lengths,
                         const std::vector<int32_t>& tgt_lengths) {
  if (src_lengths.size() != tgt_lengths.size() || src_lengths.empty()) {
    throw std::invalid_argument("length_stats: expected as many (> 0) source as target lengths");
  }
  double src = 0, tgt = 0, src_sq = 0, tgt_sq = 0, cross = 0;
  for (size_t i = 0; i < src_lengths.size(); ++i) {
    const double ls = src_lengths[i] + 1.0;  // + EOS
    const double lt = tgt_lengths[i] + 1.0;  // + EOS in tgt_out (BOS in tgt_in)
    src += ls;
    tgt += lt;
    src_sq += ls * ls;
    tgt_sq += lt * lt;
    cross += lt * ls;
  }
  return {src / tgt, src_sq / src, tgt_sq / tgt, cross / tgt};
}

// What is counted: every matrix product of the model, as multiply-adds per token, times 2 FLOPs and
// times 3 for a training step (the backward pass computes two products per forward product: the
// input's and the weight's gradient). A d x n weight applied to a token is d*n multiply-adds; a
// query attending over T keys costs T*d for its scores and T*d for the weighted sum of values.
// Left out, being O(d) per token or O(parameters) per step: biases, LayerNorm, softmax, dropout,
// embeddings, the loss and Adam. Padding is not model work and is not counted.
ModelFlops model_flops(const config::ModelConfig& model, int64_t vocab_size,
                       const LengthStats& lengths) {
  constexpr double kTrainFlopsPerMac = 6;  // (forward 1 + backward 2) x 2 FLOPs
  const double d = static_cast<double>(model.d_model);
  const double dff = static_cast<double>(model.d_ff);
  const double le = static_cast<double>(model.encoder_layers);
  const double ld = static_cast<double>(model.decoder_layers);
  const double r = lengths.src_per_tgt;
  ModelFlops f;
  f.src_dense = kTrainFlopsPerMac * r * (le * (4 * d * d + 2 * d * dff) + ld * 2 * d * d);
  f.tgt_dense = kTrainFlopsPerMac * ld * (6 * d * d + 2 * d * dff);
  f.output = kTrainFlopsPerMac * d * static_cast<double>(vocab_size);
  f.src_attention = kTrainFlopsPerMac * r * le * 2 * d * lengths.src_keys;
  f.tgt_attention = kTrainFlopsPerMac * ld * 2 * d * (lengths.tgt_keys + lengths.cross_keys);
  return f;
}

std::string describe(const ModelFlops& flops, const config::ModelConfig& model, int64_t vocab_size,
                     const LengthStats& lengths) {
  char text[1024];
  std::snprintf(text, sizeof text,
                "model FLOPs per target token: %.4g = 6 x multiply-adds of the matrix products "
                "(forward 1 + backward 2; biases, norms, softmax, loss, Adam left out)\n"
                "  with d %lld, dff %lld, layers Le %lld + Ld %lld, vocab V %lld; from the train "
                "split: source "
                "tokens per target token r %.3f, attended lengths Ts %.1f, Tt %.1f, Tx %.1f\n"
                "  encoder + memory K/V   6 r [Le(4d^2+2d dff) + Ld 2d^2] = %.4g\n"
                "  decoder dense          6 Ld (6d^2 + 2d dff)            = %.4g\n"
                "  output projection      6 d V                           = %.4g\n"
                "  encoder attention      6 r Le 2d Ts                    = %.4g\n"
                "  decoder attention      6 Ld 2d (Tt + Tx)               = %.4g\n",
                flops.total(), static_cast<long long>(model.d_model),
                static_cast<long long>(model.d_ff), static_cast<long long>(model.encoder_layers),
                static_cast<long long>(model.decoder_layers), static_cast<long long>(vocab_size),
                lengths.src_per_tgt, lengths.src_keys, lengths.tgt_keys, lengths.cross_keys,
                flops.src_dense, flops.tgt_dense, flops.output, flops.src_attention,
                flops.tgt_attention);
  return text;
}

// Datasheet figures without sparsity. The PCIe H100 runs lower clocks than the SXM/NVL parts.
double peak_bf16_tflops(const std::string& device) {
  const auto has = [&](const char* text) { return device.find(text) != std::string::npos; };
  if (has("H100") && has("PCIe")) return 756.0;
  if (has("H100") || has("H200")) return 989.4;  // SXM and NVL parts, GH200 too
  if (has("A100")) return 312.0;
  if (has("L40S")) return 362.0;
  return 0.0;
}

}  // namespace tandem::bench
