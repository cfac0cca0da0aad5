#include "tests/common/synthetic_corpus.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "data/prep/prep.h"

namespace tandem::test {
namespace {

const std::vector<std::string> kWords = {"red",   "green", "blue",  "black", "white", "stone",
                                         "river", "tree",  "house", "light", "dark",  "sun",
                                         "moon",  "star",  "fire",  "water"};

uint64_t next_random(uint64_t& state) {  // splitmix64: the same numbers on every platform
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

void write_split(const std::string& dir, const std::string& name, int64_t pairs,
                 const SyntheticCorpusOptions& options, uint64_t& state) {
  std::ofstream src(dir + "/" + name + ".src");
  std::ofstream tgt(dir + "/" + name + ".tgt");
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t span = options.max_words - options.min_words + 1;
    const int64_t n = options.min_words + static_cast<int64_t>(next_random(state) % span);
    std::vector<std::string> words;
    for (int64_t w = 0; w < n; ++w) words.push_back(kWords[next_random(state) % kWords.size()]);
    for (int64_t w = 0; w < n; ++w) src << (w ? " " : "") << words[w];
    for (int64_t w = n - 1; w >= 0; --w) tgt << (w != n - 1 ? " " : "") << words[w];
    src << '\n';
    tgt << '\n';
  }
}

}  // namespace

std::string make_reverse_corpus(const std::string& dir, const SyntheticCorpusOptions& options) {
  uint64_t state = options.seed;
  write_split(dir, "train", options.train_pairs, options, state);
  write_split(dir, "valid", options.valid_pairs, options, state);
  write_split(dir, "test", options.test_pairs, options, state);
  data::PrepOptions prep;
  for (std::string split : {"train", "valid", "test"}) {
    prep.splits.push_back({split, {dir + "/" + split + ".src"}, {dir + "/" + split + ".tgt"}});
  }
  prep.out = dir + "/corpus.h5";
  prep.vocab.vocab_size = options.vocab_size;
  data::prepare_corpus(prep);
  return prep.out;
}

}  // namespace tandem::test
