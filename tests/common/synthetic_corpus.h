// Test fixtures: a synthetic parallel corpus (the target is the source's words reversed) written as
// text files and binarized with the real tandem-prep code path, in a fresh temporary directory.
#pragma once

#include <cstdint>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::test {

using tandem::TempDir;

struct SyntheticCorpusOptions {
  int64_t train_pairs = 400;
  int64_t valid_pairs = 40;
  int64_t test_pairs = 40;
  int64_t min_words = 2;
  int64_t max_words = 8;
  int64_t vocab_size = 64;
  uint64_t seed = 1;
};

// Writes train/valid/test .src/.tgt files into `dir` and returns the path of the corpus.h5 built
// from them.
std::string make_reverse_corpus(const std::string& dir, const SyntheticCorpusOptions& options = {});

}  // namespace tandem::test
