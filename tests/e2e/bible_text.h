// Bible text for the tests of M2M-100-family models (import_m2m100_test.cpp, lora_test.cpp).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

#include "tests/e2e/run_command.h"
#include "trainer/common/temp_dir.h"

namespace tandem::test {

// The Bible's verses (data/prepare/bible.sh), SentencePiece's training text and 30 test pairs of
// at most 25 words a side, and lines of raw text: what the M2M-100-family tests build their
// SentencePiece models and reference models from (m2m100_reference.py).
class BibleText {
 public:
  // Writes them into a new temporary folder named after `name`.
  explicit BibleText(const std::string& name) : dir_(name) {
    const auto r = run_command("bash " + std::string(TANDEM_SOURCE_DIR) +
                               "/data/prepare/bible.sh " + file("bible"));
    if (r.exit_code != 0) throw std::runtime_error("bible.sh: " + r.output);
    const auto en = lines_of(read_text(file("bible/train.en")));
    const auto es = lines_of(read_text(file("bible/train.es")));
    std::string text;
    for (size_t i = 0; i < 4000 && i < en.size(); ++i) text += en[i] + "\n" + es[i] + "\n";
    write_file(file("text.txt"), text);
    const auto test_en = lines_of(read_text(file("bible/test.en")));
    const auto test_es = lines_of(read_text(file("bible/test.es")));
    std::string src, tgt;
    int pairs = 0;
    auto words = [](const std::string& line) {
      std::istringstream in(line);
      size_t n = 0;
      for (std::string w; in >> w;) ++n;
      return n;
    };
    for (size_t i = 0; i < test_en.size() && pairs < 30; ++i) {
      if (words(test_en[i]) > 25 || words(test_es[i]) > 25) continue;
      src += test_en[i] + "\n";
      tgt += test_es[i] + "\n";
      ++pairs;
    }
    write_file(file("test.src"), src);
    write_file(file("test.tgt"), tgt);
    // Accents, digits, punctuation, characters the vocabulary lacks, runs of white space (not
    // at the end of a line: there NllbTokenizer of transformers 5 adds a lone "▁" that
    // SentencePiece, and so fairseq and CTranslate2, do not; Tandem tokenizes as SentencePiece).
    write_file(file("raw.txt"),
               "Héllo, señor Ñandú: 1234 años — ¿qué tal?\n"
               "Café «crème» naïve 3.14 & 42%!\n"
               "A snowman ☃ and 漢字 here.\n"
               "  spaces   and\ttabs\n"
               "In the beginning God created the heavens and the earth.\n");
  }

  std::string file(const std::string& name) const { return dir_.file(name); }

 private:
  TempDir dir_;
};


}  // namespace tandem::test
