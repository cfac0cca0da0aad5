// A lexical shortlist (Marian's --shortlist, Sockeye's --restrict-lexicon, CTranslate2's vmap):
// per source piece the target pieces likeliest to translate it, and the most frequent target
// pieces; its file. Decoding a batch then scores only the union of its source pieces' lists
// (decode/output_columns.h). Made by ibm_model1.h, kept apart from this type (Marian's split).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab/vocab.h"

namespace tandem::data {

struct ShortlistOptions {
  // Target pieces kept per source piece, best t(target | source) first. 50 keeps a well-trained
  // model's BLEU (10 cost a 30-BLEU model 0.2 to 0.7 at beam 4; docs/translating.md).
  int64_t top_k = 50;
  int64_t frequent = 100;      // the most frequent target pieces, candidates of every batch
  int64_t iterations = 5;      // EM iterations of IBM Model 1 (uniform start)
  int64_t max_pairs = 200000;  // train pairs read, evenly spaced over the split; 0: all
};

class Shortlist {
 public:
  Shortlist() = default;
  // Over a vocabulary of lists.size() ids: `lists[s]` is source piece s's list, best first;
  // `vocab_hash` the hash of the vocabulary's bytes it was made on (fnv1a), which a decoder checks
  // its model's against; `options` how it was made (data/shortlist/ibm_model1.h).
  Shortlist(std::vector<int32_t> frequent, const std::vector<std::vector<int32_t>>& lists,
            uint64_t vocab_hash, const ShortlistOptions& options);
  // std::invalid_argument naming the path when it is missing or not a shortlist.
  static Shortlist load(const std::string& path);
  // Written whole or not at all.
  void save(const std::string& path) const;

  // The target ids a batch of `sources` (token ids) may produce: the frequent pieces, each
  // source piece's list and `extra`, sorted and each once.
  std::vector<int64_t> candidates(const std::vector<std::vector<int32_t>>& sources,
                                  const std::vector<int32_t>& extra = {}) const;
  const std::vector<int32_t>& frequent() const { return frequent_; }
  // Source piece `source`'s list, best first (none outside the vocabulary).
  std::vector<int32_t> targets_of(int32_t source) const;
  int64_t vocab_size() const { return static_cast<int64_t>(offsets_.size()) - 1; }
  // Whether it was made on `vocab` (the hash of its bytes it keeps).
  bool built_on(const Vocab& vocab) const;
  // A hash of what it holds (the vocabulary's hash, the frequent ids, the lists): a job's record
  // of which shortlist shaped its output, wherever the file lies.
  uint64_t fingerprint() const;
  const ShortlistOptions& options() const { return options_; }

 private:
  std::vector<int32_t> frequent_;
  std::vector<int64_t> offsets_;  // [vocab + 1]: source s's list is targets_[offsets_[s] ..]
  std::vector<int32_t> targets_;
  uint64_t vocab_hash_ = 0;
  ShortlistOptions options_;
};

}  // namespace tandem::data
