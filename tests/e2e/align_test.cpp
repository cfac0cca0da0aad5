// Word alignments for tandem-prep, made the way a user makes them: launch/align.sh (eflomal, both
// directions, grow-diag-final-and) on the reversal corpus, whose right alignment is known (target
// word j is source word n-1-j), then tandem-prep --train-align over it; and tandem-prep's refusals
// of alignments that do not fit their text (exit 2, one line naming file and line, nothing
// written).
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

class AlignE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-align");
    make_reverse_corpus(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string prep(const std::string& align, const std::string& out) {
    return tool("tandem-prep") + " --train-src " + file("train.src") + " --train-tgt " +
           file("train.tgt") + " --train-align " + align + " --vocab-size 64 --out " + out;
  }

  static TempDir* dir_;
};
TempDir* AlignE2E::dir_ = nullptr;

size_t words_in(const std::string& line) {
  std::istringstream in(line);
  size_t words = 0;
  for (std::string word; in >> word;) ++words;
  return words;
}

TEST_F(AlignE2E, AlignShFindsTheReversalAndPrepMapsItToPieces) {
  const auto align =
      run_command(std::string(TANDEM_LAUNCH_DIR) + "/align.sh " + file("train.src") + " " +
                  file("train.tgt") + " " + file("train.align") + " " + file("test.src") + " " +
                  file("test.tgt") + " " + file("test.align"));
  if (align.exit_code != 0 && align.output.find("pip install") != std::string::npos) {
    GTEST_SKIP() << "eflomal cannot be installed here (launch/eflomal.sh): " << align.output;
  }
  ASSERT_EQ(align.exit_code, 0) << align.output;
  for (const std::string split : {"train", "test"}) {
    const auto src = lines_of(read_text(file(split + ".src")));
    const auto links = lines_of(read_text(file(split + ".align")));
    ASSERT_EQ(links.size(), src.size()) << split;
    size_t right = 0, total = 0;
    for (size_t k = 0; k < src.size(); ++k) {
      const size_t n = words_in(src[k]);
      std::istringstream in(links[k]);
      for (std::string link; in >> link; ++total) {
        const size_t dash = link.find('-');
        ASSERT_NE(dash, std::string::npos) << link;
        right += std::stoul(link.substr(0, dash)) == n - 1 - std::stoul(link.substr(dash + 1));
      }
    }
    // Repeated words make some links ambiguous; nearly all are the reversal.
    EXPECT_GE(right, total * 9 / 10) << split << ": " << right << " of " << total;
    EXPECT_GE(total, src.size()) << split;
  }
  const auto prep = run_command(this->prep(file("train.align"), file("aligned.h5")));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("alignments: train: 400 of 400 kept pairs with links"),
            std::string::npos)
      << prep.output;
}

TEST_F(AlignE2E, AlignmentsThatDoNotFitTheTextAreOneLineExit2AndNothingIsWritten) {
  std::vector<std::string> lines(400, "0-0");
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  write_file(file("short.align"), text.substr(0, text.size() - 4));  // 399 lines
  lines[9] = "0-0 0-8";  // past every line's words (8 at most)
  text.clear();
  for (const std::string& line : lines) text += line + "\n";
  write_file(file("past.align"), text);
  const auto short_run = run_command(prep(file("short.align"), file("short.h5")));
  EXPECT_EQ(short_run.exit_code, 2);
  EXPECT_EQ(short_run.output, "tandem-prep: error: train split: '" + file("short.align") +
                                  "' has 399 alignment lines but '" + file("train.src") +
                                  "' has 400 lines; expected one alignment line per sentence "
                                  "pair\n");
  const auto past = run_command(prep(file("past.align"), file("past.h5")));
  EXPECT_EQ(past.exit_code, 2);
  EXPECT_EQ(lines_of(past.output).size(), 1u) << past.output;
  EXPECT_EQ(past.output.rfind("tandem-prep: error: line 10 of '" + file("past.align") +
                                  "' (train alignments): link '0-8': target word 8 is past the "
                                  "line's ",
                              0),
            0u)
      << past.output;
  for (const char* name : {"short.h5", "short.h5.tmp", "past.h5", "past.h5.tmp"}) {
    EXPECT_FALSE(std::filesystem::exists(file(name))) << name;
  }
}

}  // namespace
}  // namespace tandem::test
