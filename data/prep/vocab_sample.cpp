#include "data/prep/vocab_sample.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <utility>

#include "data/prep/pair_reader.h"

namespace tandem::data {
namespace {

// All the sentences offered, in order, while they are at most `capacity` (or it is 0), else a
// seeded uniform sample of that many (reservoir sampling, so memory is the sample's).
class Reservoir {
 public:
  Reservoir(uint64_t capacity, uint64_t seed) : capacity_(capacity), random_(seed) {}
  void offer(const std::string& sentence) {
    ++seen_;
    if (capacity_ == 0 || sample_.size() < capacity_) {
      sample_.push_back(sentence);
    } else if (const uint64_t slot = random_() % seen_; slot < capacity_) {
      sample_[slot] = sentence;  // kept with probability capacity / seen
    }
  }
  std::vector<std::string>& sample() { return sample_; }

 private:
  uint64_t capacity_;
  std::mt19937_64 random_;
  std::vector<std::string> sample_;
  uint64_t seen_ = 0;
};

// Pass 1 over one corpus's train split: `offer(src, tgt)` for each pair that passes the raw
// checks.
template <class Offer>
void read_usable_pairs(const SplitFiles& files, const std::string& label, Offer&& offer) {
  PairReader reader(files, label);
  RawPair pair;
  while (reader.next(pair)) {
    if (raw_verdict(pair.src, pair.tgt) == kKept) offer(pair.src, pair.tgt);
  }
}

std::invalid_argument no_usable_pairs(const SplitFiles& files, const std::string& label) {
  return std::invalid_argument(label + " split ('" + join_paths(files.src) + "', '" +
                               join_paths(files.tgt) + "') has no usable sentence pairs");
}

}  // namespace

std::vector<std::string> sample_sentences(const SplitFiles& files, const VocabTrainOptions& vocab) {
  Reservoir reservoir(static_cast<uint64_t>(vocab.input_sentence_size), vocab.seed);
  read_usable_pairs(files, "train", [&](const std::string& src, const std::string& tgt) {
    reservoir.offer(src);
    reservoir.offer(tgt);
  });
  if (reservoir.sample().empty()) throw no_usable_pairs(files, "train");
  return std::move(reservoir.sample());
}

std::vector<std::string> sample_by_language(const std::vector<CorpusFiles>& corpora,
                                            const VocabTrainOptions& vocab) {
  std::vector<std::string> languages;
  const auto index_of = [&languages](const std::string& language) {
    const auto found = std::find(languages.begin(), languages.end(), language);
    if (found != languages.end()) return static_cast<size_t>(found - languages.begin());
    languages.push_back(language);
    return languages.size() - 1;
  };
  for (const CorpusFiles& corpus : corpora) {
    index_of(corpus.src_lang);
    index_of(corpus.tgt_lang);
  }
  const auto share = vocab.input_sentence_size == 0
                         ? uint64_t{0}
                         : std::max<uint64_t>(1, vocab.input_sentence_size / languages.size());
  std::vector<Reservoir> reservoirs;
  for (size_t k = 0; k < languages.size(); ++k) {
    reservoirs.emplace_back(share, vocab.seed + 0x9E3779B97F4A7C15ull * k);
  }
  for (const CorpusFiles& corpus : corpora) {
    Reservoir& src_side = reservoirs[index_of(corpus.src_lang)];
    Reservoir& tgt_side = reservoirs[index_of(corpus.tgt_lang)];
    const SplitFiles& train = *find_split(corpus, "train");
    int64_t usable = 0;
    read_usable_pairs(train, label_of(corpus, "train"),
                      [&](const std::string& src, const std::string& tgt) {
                        src_side.offer(src);
                        tgt_side.offer(tgt);
                        ++usable;
                      });
    if (usable == 0) throw no_usable_pairs(train, label_of(corpus, "train"));
  }
  std::vector<std::string> sample;
  for (Reservoir& reservoir : reservoirs) {
    for (std::string& sentence : reservoir.sample()) sample.push_back(std::move(sentence));
  }
  return sample;
}

}  // namespace tandem::data
