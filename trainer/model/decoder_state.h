// What incremental decoding carries between steps: per decoder layer the keys and values of the
// positions fed so far and those of the encoder output.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <vector>

#include "trainer/model/alignment.h"

namespace tandem::model {

class RestrictedOutput;  // model/output_layer.h

// What incremental decoding carries between steps: per decoder layer the keys and values of the
// positions fed so far (allocated once per batch; beam search's reorders rewrite a table of where
// each hypothesis's positions are on the CPU, and move rows in place elsewhere) and those of the
// encoder output (one per sentence, shared by the sentence's hypotheses).

struct LayerCache {
  // [allocated rows, capacity, 2 d_model]: keys | values of positions 0..step-1. Where decoder
  // row r's positions are: SelfCache::rows.
  torch::Tensor self_kv;
  // [sentences, src_len, 2 d_model]: keys | values of the encoder output, once per sentence.
  torch::Tensor cross_kv;
};

// One layer's self-attention cache for a step: decoder row r writes its newest key | value at
// kv[r, step], and finds position j < step at kv[rows[r][j], j].
struct SelfCache {
  torch::Tensor kv;  // LayerCache::self_kv: all its rows on the CPU, elsewhere its first rows()
  // [rows(), capacity] int32 on the CPU, with rows[r][step] = r. Undefined on other devices,
  // where cache row r is decoder row r at every position.
  torch::Tensor rows;
};

class DecoderState {
 public:
  DecoderState() = default;
  // One decoder row per sentence of src_pad [sentences, src_len] (bool, true at padding); the
  // caches' cross_kv are set by the decoder.
  explicit DecoderState(torch::Tensor src_pad);
  // Hands the CPU caches' storage to the next state decoding on this thread (see storage_).
  ~DecoderState();
  DecoderState(const DecoderState&) = default;
  DecoderState(DecoderState&&) = default;
  DecoderState& operator=(const DecoderState&) = default;
  DecoderState& operator=(DecoderState&&) = default;

  torch::Tensor src_pad;  // [sentences, src_len]
  std::vector<LayerCache> layers;
  int64_t step = 0;  // positions fed so far
  // The output layer for this batch when restricted to some target ids (a shortlist's:
  // Transformer::restrict_output; logits column i is id i of its ids()); null: the vocabulary.
  std::shared_ptr<const RestrictedOutput> output;
  // Set: each step reads these heads' cross-attention into `attention`, [rows, src_len], the log
  // of their mean attention for the newest position of each row (alignment.h).
  std::optional<AlignmentHeads> readout;
  torch::Tensor attention;

  int64_t rows() const { return rows_; }
  int64_t width() const { return width_; }  // consecutive decoder rows per sentence
  int64_t sentences() const { return src_pad.size(0); }

  // Room for `rows` decoder rows of `steps` positions each, so that select() and the decoder's
  // steps do not reallocate (they grow the caches themselves when needed).
  void reserve(int64_t rows, int64_t steps);

  // Keeps the decoder rows `rows` (indices of current rows, in their new order), `width`
  // consecutive rows per sentence afterwards; the rows of one sentence must all come from one
  // current sentence, and sentences keep their order (beam search's reorder, or dropping
  // finished sentences). On the CPU no cached key or value moves: the table of where each row's
  // positions are is rewritten (a few ints per position), and a sentence's hypotheses, sharing
  // their prefix, read the same cache rows. Elsewhere the rows that move are copied.
  void select(const std::vector<int64_t>& rows, int64_t width);

  // layer's cache with room for position `step` (grown when full).
  SelfCache self_cache(size_t layer);

 private:
  int64_t capacity() const;
  int64_t allocated_rows() const;
  void reallocate(int64_t rows, int64_t steps);
  bool on_cpu() const;
  // select() off the CPU: rows[i] to row i, for the first `step` positions.
  void move_rows(const std::vector<int64_t>& rows);

  // Per layer, the flat CPU buffer its self_kv views. A batch's caches are tens of MB each, above
  // glibc's largest mmap threshold (32 MB), so each batch would map fresh pages and fault on every
  // first touch; a finished state's buffers are kept (a few per thread) for the next one instead.
  std::vector<torch::Tensor> storage_;
  // On the CPU, [allocated rows, capacity]: the cache row of each decoder row's positions.
  std::vector<int32_t> cache_rows_;
  int64_t rows_ = 0;
  int64_t width_ = 1;
};

}  // namespace tandem::model
