// What tandem-prep reports: each split's pairs read, kept and skipped (by reason), its tokens, and
// where the first skipped pairs were; with several corpora, each one's figures too.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::data {

struct SplitSummary {
  std::string name;
  int64_t lines = 0;                       // pairs read
  int64_t kept = 0;                        // pairs written
  std::map<std::string, int64_t> dropped;  // reason ("empty", "too_long", "invalid_utf8") → pairs
  int64_t src_tokens = 0;
  int64_t tgt_tokens = 0;
  // With word alignments: kept pairs with at least one link, and links between pieces; -1 without.
  int64_t aligned = -1;
  int64_t links = -1;
  // Where the first skipped pairs were, with why: "line 7 of 'train.de': invalid_utf8".
  std::vector<std::string> first_skipped;
};

struct PrepSummary {
  int64_t vocab_size = 0;
  std::vector<SplitSummary> splits;  // each split's totals over the corpora
  // With several corpora: each one's name and its splits' figures, in the order given.
  std::vector<std::pair<std::string, std::vector<SplitSummary>>> corpora;
  // The language tags the source sentences start with, and their ids: (">>es<<", 4), ...
  std::vector<std::pair<std::string, int32_t>> tags;
  std::string to_string() const;  // the summary tandem-prep prints
};

}  // namespace tandem::data
