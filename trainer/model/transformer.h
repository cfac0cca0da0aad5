// The encoder-decoder Transformer (Vaswani et al. 2017, the seeds' model), with parameter names
// that are stable dotted paths (checkpoint dataset names).
#pragma once

#include <torch/torch.h>

#include <optional>
#include <vector>

#include "trainer/common/token_ids.h"
#include "trainer/model/alignment.h"
#include "trainer/model/decoder_state.h"
#include "trainer/model/layers.h"
#include "trainer/model/output_layer.h"

namespace tandem::model {

// The encoder-decoder Transformer (Vaswani et al. 2017, the seeds' model): scaled token embeddings,
// sinusoidal positions, multi-head attention with padding and causal masks, position-wise FFN,
// residual + LayerNorm (post-norm, or pre-norm as an option), dropout, output projection.
// Parameter names are stable dotted paths (they are checkpoint dataset names), e.g.
//   src_embed.weight, tgt_embed.weight, encoder.layers.0.self_attn.q_proj.weight,
//   decoder.layers.2.cross_attn.out_proj.bias, decoder.final_norm.weight (pre-norm only),
//   output_proj.weight, output_proj.bias.
// With tie_embeddings the one shared matrix is registered once, as src_embed.weight: there is no
// tgt_embed module and output_proj has only its bias. The sinusoidal table is a buffer
// ("positions"), not a parameter: it is not in named_parameters(), so checkpoints skip it.

// Where the sinusoidal table puts the sin and cos of angle i = p / 10000^(2i/d):
//   interleaved: pe[p, 2i] = sin, pe[p, 2i+1] = cos (the paper's formula, Tandem's default);
//   halves: pe[p, i] = sin, pe[p, h + i] = cos with h = ceil(d/2) (Marian, MarianMT);
//   fairseq: pe[p, i] = sin, pe[p, h + i] = cos of (p + 2) / 10000^(i/(h-1)) with h = floor(d/2)
//     (a last column of zeros when d is odd): fairseq's table (M2M-100, NLLB-200), whose rows start
//     after its padding index 1, computed in float32 as fairseq computes it.
enum class PositionLayout { kInterleaved, kHalves, kFairseq };

// Checked by the TransformerImpl constructor (std::invalid_argument naming the field).
struct TransformerOptions {
  int64_t vocab_size = 8000;
  int64_t d_model = 256;
  int64_t heads = 4;
  int64_t encoder_layers = 3;
  int64_t decoder_layers = 3;
  int64_t d_ff = 1024;
  double dropout = 0.1;
  bool pre_norm = false;
  bool tie_embeddings = false;  // src_embed, tgt_embed and output_proj share one weight
  int64_t max_positions = 1024;
  Activation activation = Activation::kRelu;  // the feed-forward layers'
  PositionLayout positions = PositionLayout::kInterleaved;
  // Called on each part (each embedding, encoder and decoder layer, final LayerNorm, the output
  // layer) as soon as it is built, so that a model too large for memory in float32 never exists
  // whole in it (hollow_parameters: names and shapes alone). When set, the parameters are not
  // initialised: their values are the caller's to set (from a checkpoint).
  PartBuilt on_part_built;
  // Activation checkpointing of every encoder and decoder layer in training (StackOptions).
  bool recompute_layers = false;
};

// Gives each of the module's parameters (its own and its submodules') one element, expanded to the
// parameter's shape: the names and shapes stay, the memory goes. For a model's layout alone (what
// tandem-import writes); such parameters cannot be trained, loaded or computed with.
void hollow_parameters(torch::nn::Module& module);

// [max_len, d_model] in `layout`, the angles in double, the table in float32.
torch::Tensor sinusoidal_positions(int64_t max_len, int64_t d_model,
                                   PositionLayout layout = PositionLayout::kInterleaved);

class TransformerImpl : public torch::nn::Module {
 public:
  explicit TransformerImpl(const TransformerOptions& options);

  // Sequences longer than max_positions throw std::invalid_argument.
  // src [batch, src_len] int64, padded with kPadId → memory [batch, src_len, d_model].
  torch::Tensor encode(const torch::Tensor& src);
  // tgt_in [batch, tgt_len] (BOS-first, padded) attending causally to itself and to `memory`
  // (src gives its padding) → logits [batch, tgt_len, vocab].
  torch::Tensor decode(const torch::Tensor& tgt_in, const torch::Tensor& memory,
                       const torch::Tensor& src);
  // encode + decode.
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& tgt_in);
  // The training loss of predicting tgt_out [batch, tgt_len] (kPadId at padding) from src and
  // tgt_in: forward() with the output layer fused into the loss (OutputProjection::loss), so the
  // [batch, tgt_len, vocab] logits never exist whole. With guided alignment (links given), the
  // loss adds guided->weight times alignment_loss_sum of the aligned heads' attention
  // (TokenLoss::alignment_sum).
  TokenLoss loss(const torch::Tensor& src, const torch::Tensor& tgt_in,
                 const torch::Tensor& tgt_out, double label_smoothing,
                 const GuidedAlignment* guided = nullptr);

  // Forced alignment: the log of `heads`' mean cross-attention as each position of tgt_in [batch,
  // tgt_len] predicts the next (teacher forcing) → [batch, tgt_len, src_len] float32, -inf at
  // src's padding. No output layer runs.
  torch::Tensor cross_attention(const torch::Tensor& src, const torch::Tensor& tgt_in,
                                const AlignmentHeads& heads);

  // Incremental decoding: start from an encoded batch (one decoder row per sentence; the state's
  // select() makes and reorders beams), then feed one token per row per step.
  DecoderState start_decoding(const torch::Tensor& memory, const torch::Tensor& src);
  // tokens [rows] int64 → logits [rows, vocab] for the next position; updates `state`.
  // Every fed token is attended to later (no padding mask on the cached steps).
  torch::Tensor decode_step(const torch::Tensor& tokens, DecoderState& state);
  // From now on decode_step() on `state` computes the logits of target ids `ids` ([n] int64,
  // sorted, each once) alone: [rows, n], column i for ids[i] (a shortlist's vocabulary).
  void restrict_output(DecoderState& state, const torch::Tensor& ids);

  // Decoding on CPUs: every matrix product of the encoder, the decoder and the output layer runs
  // on copies of the weights as they are now, prepared once (FrozenLinear: packed fp32, or int8);
  // embeddings, LayerNorm, attention's softmax and products of activations stay float. For
  // inference only: no gradients, and later changes to the parameters are not seen.
  // std::runtime_error for int8 when LibTorch has no int8 engine here.
  void freeze(kernels::InferencePrecision precision);
  // The precision freeze() was given; none while the model runs on its parameters.
  std::optional<kernels::InferencePrecision> frozen() const { return frozen_; }

  const TransformerOptions& options() const { return options_; }

 private:
  // Xavier-uniform linear weights, zero biases, N(0, d_model^-0.5) embeddings.
  void init_parameters();
  // tokens [batch, len] → scaled embeddings + positions offset.. offset+len-1, dropped out.
  torch::Tensor embed(const torch::Tensor& tokens, const HeldWeight& weight, int64_t offset);
  HeldWeight tgt_weight() const;  // src_embed's weight when tied
  // Decoder stack output for tgt_in attending to memory: [batch, tgt_len, d_model].
  torch::Tensor decoder_states(const torch::Tensor& tgt_in, const torch::Tensor& memory,
                               const torch::Tensor& src, AttentionReadout* readout = nullptr);

  TransformerOptions options_;
  torch::nn::Embedding src_embed_{nullptr};
  torch::nn::Embedding tgt_embed_{nullptr};  // absent when tied
  Encoder encoder_{nullptr};
  Decoder decoder_{nullptr};
  OutputProjection output_proj_{nullptr};
  torch::Tensor positions_;  // [max_positions, d_model] buffer
  std::optional<kernels::InferencePrecision> frozen_;
};
TORCH_MODULE(Transformer);

}  // namespace tandem::model
