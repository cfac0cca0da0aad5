// Cross-attention read as word alignment: the mean attention of a decoder layer's first heads
// (what guided alignment trains, what --alignments reads and what CTranslate2's alignment_layer
// and alignment_heads name), and guided alignment's loss (Garg et al., EMNLP 2019).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace tandem::model {

// The heads read as alignment: `heads` heads of decoder layer `layer` (0-based) from head `first`
// on (guided alignment trains the first ones; --alignment-head reads any one). A target piece's
// attention is read where the decoder predicts it, or with `shift` one position later, where it is
// the decoder's input (Shift-Att, Chen et al., EMNLP 2020: the decoder then knows the piece it
// aligns; the last piece's row is the one that predicts EOS).
struct AlignmentHeads {
  int64_t layer = 0;
  int64_t heads = 1;
  int64_t first = 0;
  bool shift = false;
};

// `layer` counted from the bottom (0-based) when negative counts from the top (-1: the last of
// `layers`). std::invalid_argument when it is outside the stack.
int64_t bottom_up_layer(int64_t layer, int64_t layers);

// std::invalid_argument naming the layer or head `read` names that a model of `layers` decoder
// layers of `heads` heads lacks.
void check_alignment_heads(const AlignmentHeads& read, int64_t layers, int64_t heads);

// What a forward pass reads out of the aligned layer's cross-attention: filled by the decoder.
struct AttentionReadout {
  AlignmentHeads heads;
  // [batch, tgt_len, src_len] float32: log of the mean over the heads of their attention
  // probabilities (-inf at padding keys); differentiable in training.
  torch::Tensor log_probs;
};

// log(mean over heads h of `read` (first .. first + heads - 1) of softmax(q_h k_hᵀ / sqrt(d_h))
// over the unmasked keys), for q [batch, q_len, d] and k [batch, k_len, d] split into `heads`
// heads of d / heads, key_pad [batch, k_len] true at padding (undefined: none) → [batch, q_len,
// k_len] float32. Computed in float32 with plain tensor operations (also under bf16 autocast),
// differentiable.
torch::Tensor mean_attention_log_probs(const torch::Tensor& q, const torch::Tensor& k,
                                       const torch::Tensor& key_pad, int64_t heads,
                                       const AlignmentHeads& read);

// Guided alignment: the links of a batch, on the log-probabilities' device.
struct GuidedAlignment {
  AlignmentHeads heads;
  double weight = 0;  // of the alignment loss beside the token loss
  // [links, 3] int64: batch row, target position (the query that predicts that target piece; the
  // loss reads the next one with heads.shift), source position; [links] float32: 1 / the links
  // of that target position, so each aligned target position's weights sum to 1 (the
  // row-normalised alignment matrix).
  torch::Tensor links, link_weights;
};

// Σ over the links of -link_weight · log_probs[row, target, source] (scalar float32): the summed
// cross-entropy of each aligned target position's attention against its row of the alignment
// matrix. log_probs [batch, tgt_len, src_len] (AttentionReadout::log_probs).
torch::Tensor alignment_loss_sum(const torch::Tensor& log_probs, const torch::Tensor& links,
                                 const torch::Tensor& link_weights);

}  // namespace tandem::model
