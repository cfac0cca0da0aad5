// Reading a binarized HDF5 corpus (written by prep.h): its vocabulary, per-split sentence lengths,
// and the token ranges of chosen sentences, so that a rank reads only its own batches.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "data/vocab.h"

namespace tandem::data {

// Reading a binarized HDF5 corpus (written by prep.h): its vocabulary, per-split sentence lengths,
// and the token ranges of chosen sentences (HDF5 hyperslabs), so a rank reads only its own batches.
// Layout: /vocab (uint8, Vocab::bytes()), /<split>/{src,tgt}/{tokens int32, offsets int64},
// offsets have n+1 entries; tokens carry no BOS/EOS (added at batch assembly). A file of several
// corpora (format_version 2) has their pairs one corpus after another in each split, and
// /corpora/<name> (attributes src_lang, tgt_lang, tag) with /corpora/<name>/<split> (attributes
// first, count, and the provenance /<split> has in a file of one corpus).

// One corpus of a file that holds several (tandem-prep --corpora): a direction with its own
// range of pairs in each split. A file of one corpus is one of these, named "", without
// languages, over every split whole.
struct CorpusPart {
  std::string name;
  std::string src_lang, tgt_lang;  // "" when the file records none
  std::string tag;                 // the language tag its source sentences start with; "" none
  // Per split the corpus has: the first pair's index in the split and the number of pairs.
  std::map<std::string, std::pair<int64_t, int64_t>> ranges;
};

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
  // The corpora, in the order tandem-prep was given them; std::invalid_argument naming the file
  // when their ranges do not tile each split they are in.
  std::vector<CorpusPart> corpora() const;
  int64_t size(const std::string& split) const;  // sentence pairs
  // Token counts per sentence (from the offsets), for the batch plan.
  std::vector<int32_t> src_lengths(const std::string& split) const;
  std::vector<int32_t> tgt_lengths(const std::string& split) const;
  // max(src, tgt) + 1 per sentence (batch_plan.h's padded_length), 2 bytes a pair.
  std::vector<uint16_t> padded_lengths(const std::string& split) const;
  // The pairs at `indices` (any order, repeats allowed), in that order.
  std::vector<SentencePair> read(const std::string& split,
                                 const std::vector<int64_t>& indices) const;

 private:
  std::vector<SentencePair> read_pairs(const std::string& split,
                                       const std::vector<int64_t>& indices) const;

  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tandem::data
