// What the export suites share: the synthetic reverse-the-words corpus prepared with a 64-piece
// vocabulary (and its word alignment, for guided alignment), and small models (width 64, 2+2
// layers) trained on it on 2 ranks, each in its own folder of a suite's TempDir.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/common/temp_dir.h"

namespace tandem::test {

// The words of a line, as eflomal and Pharaoh's indices count them (between white space).
inline size_t words_in(const std::string& line) {
  std::istringstream in(line);
  size_t words = 0;
  for (std::string word; in >> word;) ++words;
  return words;
}

// The i-j pairs of a Pharaoh line.
inline std::vector<std::pair<size_t, size_t>> links_of(const std::string& line) {
  std::vector<std::pair<size_t, size_t>> links;
  std::istringstream in(line);
  for (std::string link; in >> link;) {
    const size_t dash = link.find('-');
    links.emplace_back(std::stoul(link.substr(0, dash)), std::stoul(link.substr(dash + 1)));
  }
  return links;
}

// The reversal corpus's right alignment of the lines of `src`: target word j to source word
// n-1-j, in Pharaoh's "i-j".
inline std::string reversal_alignment(const std::string& src) {
  std::string text;
  for (const std::string& line : lines_of(read_text(src))) {
    const size_t n = words_in(line);
    for (size_t j = 0; j < n; ++j) {
      text += (j == 0 ? "" : " ") + std::to_string(n - 1 - j) + "-" + std::to_string(j);
    }
    text += "\n";
  }
  return text;
}

// train.src/tgt (with train.align, its right word alignment) and test.src/tgt of the reverse
// corpus in `dir`, prepared into corpus.h5.
inline void prepare_reverse_corpus(const TempDir& dir, int64_t train_pairs, int64_t test_pairs) {
  SyntheticCorpusOptions options;
  options.train_pairs = train_pairs;
  options.test_pairs = test_pairs;
  make_reverse_corpus(dir.path(), options);
  write_file(dir.file("train.align"), reversal_alignment(dir.file("train.src")));
  const auto prep = run_command(
      tool("tandem-prep") + " --train-src " + dir.file("train.src") + " --train-tgt " +
      dir.file("train.tgt") + " --train-align " + dir.file("train.align") + " --test-src " +
      dir.file("test.src") + " --test-tgt " + dir.file("test.tgt") + " --vocab-size 64 --out " +
      dir.file("corpus.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
}

// multi.h5 in `dir`: two directions of the reverse corpus's train split (tandem-prep --corpora),
// reversing under >>r<< and copying under >>c<<.
inline void prepare_two_directions(const TempDir& dir) {
  write_file(dir.file("corpora.yaml"),
             "corpora:\n"
             "  - {name: rev, src_lang: s, tgt_lang: r, train: {src: train.src, tgt: train.tgt}}\n"
             "  - {name: copy, src_lang: s, tgt_lang: c, train: {src: train.src, tgt: "
             "train.src}}\n");
  const auto prep = run_command(tool("tandem-prep") + " --corpora " + dir.file("corpora.yaml") +
                                " --vocab-size 64 --out " + dir.file("multi.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
}

// A small model trained on `corpus` (a file of `dir`) for `steps` steps on 2 ranks, into
// dir/run-NAME (last.h5 at the end); `flags` change its config (--set ...).
inline void train_small_model(const TempDir& dir, const std::string& name,
                              const std::string& corpus, int steps, const std::string& flags) {
  const std::string config = dir.file(name + ".yaml");
  write_file(config, "model: {d_model: 64, heads: 2, encoder_layers: 2, decoder_layers: 2, "
                     "d_ff: 128, dropout: 0, max_positions: 128}\n"
                     "data: {corpus: " + dir.file(corpus) + ", max_tokens: 512, seed: 3}\n"
                     "train: {max_steps: " + std::to_string(steps) +
                     ", lr: 0.003, seed: 5, threads: 1}\n"
                     "checkpoint: {dir: " + dir.file("run-" + name) + ", every_steps: 0}\n"
                     "log: {every_steps: 100}\n");
  const auto r =
      run_command(mpirun(2) + tool("tandem-train") + " --config " + config + " " + flags);
  ASSERT_EQ(r.exit_code, 0) << r.output;
}

}  // namespace tandem::test
