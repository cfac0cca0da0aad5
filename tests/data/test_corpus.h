// Fixtures for the data tests: a private temporary directory, a deterministic synthetic parallel
// corpus (unique sentences over a small word list), and a prepared HDF5 corpus built from it.
#pragma once

#include <unistd.h>  // getpid

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "data/prep/prep.h"
#include "trainer/common/temp_dir.h"

namespace tandem::data::testing {

// Scratch directories for the data tests.
class TempDir : public tandem::TempDir {
 public:
  TempDir() : tandem::TempDir("data-test") {}
};

inline void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const std::string& line : lines) out << line << "\n";
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Pairs of unique sentences: `count` sources of 2-9 words and a word-for-word "translation".
struct SyntheticText {
  std::vector<std::string> src;
  std::vector<std::string> tgt;
};

inline SyntheticText synthetic_text(int count, uint64_t seed) {
  static const std::vector<std::string> kSrc = {"der",   "die", "das",   "hund",  "katze", "haus",
                                                "sieht", "mag", "gross", "klein", "rot",   "und"};
  static const std::vector<std::string> kTgt = {"the",  "the",   "the", "dog",   "cat", "house",
                                                "sees", "likes", "big", "small", "red", "and"};
  uint64_t state = seed;
  auto draw = [&state](uint64_t bound) {  // a 64-bit LCG (Knuth's MMIX constants)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % bound;
  };
  SyntheticText text;
  std::set<std::string> seen;
  while (static_cast<int>(text.src.size()) < count) {
    const uint64_t words = 2 + draw(8);
    std::string src, tgt;
    for (uint64_t w = 0; w < words; ++w) {
      const uint64_t word = draw(kSrc.size());
      src += (w ? " " : "") + kSrc[word];
      tgt += (w ? " " : "") + kTgt[word];
    }
    if (!seen.insert(src).second) continue;
    text.src.push_back(src);
    text.tgt.push_back(tgt);
  }
  return text;
}

// Options for a small, quick vocabulary over the synthetic word list.
inline VocabTrainOptions small_vocab() {
  VocabTrainOptions options;
  options.vocab_size = 100;
  return options;
}

// A paired vocabulary (a SentencePiece model a side, one id table, as an imported MarianMT model
// has) of small models trained on `src` and `tgt`: the four specials, then `extra` (language tags),
// then every piece of either side once, in byte order.
inline Vocab paired_vocab(const std::vector<std::string>& src, const std::vector<std::string>& tgt,
                          const std::vector<std::string>& extra = {}) {
  const Vocab source = Vocab::train(src, small_vocab());
  const Vocab target = Vocab::train(tgt, small_vocab());
  std::set<std::string> rest;
  for (const Vocab* side : {&source, &target}) {
    for (int32_t id = kEosId + 1; id < side->size(); ++id) rest.insert(side->piece(id));
  }
  std::vector<std::string> pieces = {"<pad>", "<unk>", "<s>", "</s>"};
  pieces.insert(pieces.end(), extra.begin(), extra.end());
  pieces.insert(pieces.end(), rest.begin(), rest.end());
  return Vocab::from_pair(source.bytes(), target.bytes(), pieces);
}

// Writes `text` as train files in `dir` and prepares "<dir>/corpus.h5"; returns its path.
inline std::string prepare_synthetic_corpus(const TempDir& dir, const SyntheticText& text) {
  write_lines(dir.file("train.src"), text.src);
  write_lines(dir.file("train.tgt"), text.tgt);
  PrepOptions options;
  options.splits = {{"train", {dir.file("train.src")}, {dir.file("train.tgt")}}};
  options.out = dir.file("corpus.h5");
  options.vocab = small_vocab();
  prepare_corpus(options);
  return options.out;
}

}  // namespace tandem::data::testing
