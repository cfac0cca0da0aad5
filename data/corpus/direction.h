// A corpus's directions: each a name ("en-es"), its languages, the tag its sources start with, and
// per split the range of that split's pairs it holds. Corpus reads a file's set once; validation,
// tandem-eval, the batch plan's sampling and the trainer take it from there.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::data {

// Pairs [first, first + count) of a split.
struct PairRange {
  int64_t first = 0;
  int64_t count = 0;
  int64_t end() const { return first + count; }
};

// One direction of a corpus file: a corpus of tandem-prep --corpora, or the whole of a file of one
// corpus (named "", without languages, over every split whole).
struct Direction {
  std::string name;                // "en-es"; "" in a file of one corpus
  std::string src_lang, tgt_lang;  // "" when the file records none
  std::string tag;                 // the language tag its sources start with (">>es<<"); "" none
  std::map<std::string, PairRange> splits;  // per split it has: "train", "valid", "test"

  // Its range of `split`; nullptr when it has none there.
  const PairRange* range(const std::string& split) const;
};

// The tag a source sentence starts with to ask for `language` (Marian's and OPUS-MT's
// convention): ">>es<<".
std::string language_tag(const std::string& language);

// A file's directions, in the order tandem-prep was given them: one, or several (tandem-prep
// --corpora), their ranges one after another in each split.
class Directions {
 public:
  explicit Directions(std::vector<Direction> directions);

  // Whether the file holds several: then training and evaluation report each one's figures.
  bool several() const { return all_.size() > 1; }
  size_t size() const { return all_.size(); }
  const Direction& operator[](size_t index) const { return all_[index]; }
  std::vector<Direction>::const_iterator begin() const { return all_.begin(); }
  std::vector<Direction>::const_iterator end() const { return all_.end(); }

  // The direction of that name; nullptr when there is none.
  const Direction* find(const std::string& name) const;
  // Their names when there are several (what per-direction figures are named by); else none.
  std::vector<std::string> names() const;
  // "en-es, es-en", for messages; "one, unnamed" for a file of one corpus.
  std::string listed() const;

 private:
  std::vector<Direction> all_;
};

}  // namespace tandem::data
