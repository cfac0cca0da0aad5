// Reading a binarized HDF5 corpus (written by prep.h): its vocabulary, per-split sentence lengths,
// and the token ranges of chosen sentences, so that a rank reads only its own batches.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/vocab.h"

namespace tandem::data {

// Reading a binarized HDF5 corpus (written by prep.h): its vocabulary, per-split sentence lengths,
// and the token ranges of chosen sentences (HDF5 hyperslabs), so a rank reads only its own batches.
// Layout: /vocab (uint8, Vocab::bytes()), /<split>/{src,tgt}/{tokens int32, offsets int64},
// offsets have n+1 entries; tokens carry no BOS/EOS (added at batch assembly).

struct SentencePair {
  std::vector<int32_t> src;
  std::vector<int32_t> tgt;
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
  int64_t size(const std::string& split) const;    // sentence pairs
  // Token counts per sentence (from the offsets), for the batch plan.
  std::vector<int32_t> src_lengths(const std::string& split) const;
  std::vector<int32_t> tgt_lengths(const std::string& split) const;
  // max(src, tgt) + 1 per sentence (batch_plan.h's padded_length), 2 bytes a pair.
  std::vector<uint16_t> padded_lengths(const std::string& split) const;
  // The pairs at `indices` (any order, repeats allowed), in that order.
  std::vector<SentencePair> read(const std::string& split, const std::vector<int64_t>& indices) const;

 private:
  std::vector<SentencePair> read_pairs(const std::string& split,
                                       const std::vector<int64_t>& indices) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::data
