// Reading a binarized HDF5 corpus (written by tandem-prep; layout in corpus_format.h): its
// vocabulary, its directions, per-split sentence lengths, and the tokens of chosen sentences (HDF5
// hyperslabs), so that a rank reads only its own batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/corpus/direction.h"
#include "data/vocab/vocab.h"

namespace tandem::data {

struct SentencePair {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
  // Its word alignment's links between pieces, when read (Corpus::Links::kRead) from a split
  // that has them: flat pairs source piece, target piece (indices into src and tgt), by target
  // then source; none for a pair given no links.
  std::vector<int32_t> links = {};
};

class Corpus {
 public:
  // Throws std::invalid_argument naming the path if it is missing, not HDF5, or not a corpus.
  explicit Corpus(const std::string& path);
  Corpus(Corpus&&) noexcept;
  ~Corpus();

  const std::string& path() const;
  Vocab vocab() const;
  bool has_split(const std::string& split) const;  // "train", "valid", "test"
  // The file's directions, read on first use; std::invalid_argument naming the file when their
  // ranges do not tile each split they are in.
  const Directions& directions() const;
  int64_t size(const std::string& split) const;  // sentence pairs
  // Token counts per sentence (from the offsets), for the batch plan.
  std::vector<int32_t> src_lengths(const std::string& split) const;
  std::vector<int32_t> tgt_lengths(const std::string& split) const;
  // max(src, tgt) + 1 per sentence (batch_plan.h's padded_length), 2 bytes a pair.
  std::vector<uint16_t> padded_lengths(const std::string& split) const;
  // Whether tandem-prep was given word alignments for the split (corpus_format.h's align).
  bool has_alignments(const std::string& split) const;
  // Whether read() reads the pairs' links too (from a split that has alignments).
  enum class Links { kSkip, kRead };
  // The pairs at `indices` (any order, repeats allowed), in that order.
  std::vector<SentencePair> read(const std::string& split, const std::vector<int64_t>& indices,
                                 Links links = Links::kSkip) const;

 private:
  std::vector<SentencePair> read_pairs(const std::string& split,
                                       const std::vector<int64_t>& indices, Links links) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::data
