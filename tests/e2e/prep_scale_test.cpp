// tandem-prep on a corpus from the project's generator (data/prepare/synthetic.py), at CI size:
// the generator is deterministic, its gzip output reads like its plain output, and the corpus is
// byte-identical at 1 and 2 encoding threads across several chunks.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "data/corpus/corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/common/temp_dir.h"

namespace tandem::test {
namespace {

constexpr int kPairs = 150000;  // three 65536-pair chunks

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class PrepScale : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("prep-scale");
    for (const char* flags : {"", " --gzip"}) {
      const auto generated =
          run_command(std::string("python3 ") + TANDEM_SYNTHETIC_SCRIPT + " --pairs " +
                      std::to_string(kPairs) + flags + " --out " + dir_->file("train"));
      ASSERT_EQ(generated.exit_code, 0) << generated.output;
    }
    const auto valid = run_command(std::string("python3 ") + TANDEM_SYNTHETIC_SCRIPT +
                                   " --pairs 500 --seed 2 --out " + dir_->file("valid"));
    ASSERT_EQ(valid.exit_code, 0) << valid.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static CommandResult prep(const std::string& suffix, int threads, const std::string& out) {
    return run_command(tool("tandem-prep") + " --train-src " + dir_->file("train.src" + suffix) +
                       " --train-tgt " + dir_->file("train.tgt" + suffix) + " --valid-src " +
                       dir_->file("valid.src") + " --valid-tgt " + dir_->file("valid.tgt") +
                       " --vocab-size 2000 --vocab-sample 30000 --threads " +
                       std::to_string(threads) + " --out " + dir_->file(out));
  }

  static TempDir* dir_;
};

TempDir* PrepScale::dir_ = nullptr;

TEST_F(PrepScale, TheGeneratorIsDeterministicAndItsGzipIsTheSameText) {
  const auto again = run_command(std::string("python3 ") + TANDEM_SYNTHETIC_SCRIPT +
                                 " --pairs 1000 --out " + dir_->file("again"));
  ASSERT_EQ(again.exit_code, 0) << again.output;
  const std::string all = read_bytes(dir_->file("train.src"));
  size_t end = 0;
  for (int line = 0; line < 1000; ++line) end = all.find('\n', end) + 1;
  EXPECT_EQ(read_bytes(dir_->file("again.src")), all.substr(0, end));
  const auto unzipped =
      run_command("gzip -dc " + dir_->file("train.src.gz") + " | cmp - " + dir_->file("train.src"));
  EXPECT_EQ(unzipped.exit_code, 0) << unzipped.output;
}

TEST_F(PrepScale, OneAndTwoThreadsWriteTheSameFileAndGzipInputTheSameTokens) {
  const auto one = prep(".gz", 1, "one.h5");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two = prep(".gz", 2, "two.h5");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const std::string bytes = read_bytes(dir_->file("one.h5"));
  EXPECT_EQ(read_bytes(dir_->file("two.h5")), bytes) << "the thread count changed the corpus";

  const auto plain = prep("", 2, "plain.h5");
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const data::Corpus from_gzip(dir_->file("one.h5"));
  const data::Corpus from_plain(dir_->file("plain.h5"));
  ASSERT_EQ(from_gzip.size("train"), kPairs);  // every generated pair is distinct and kept
  EXPECT_EQ(from_plain.src_lengths("train"), from_gzip.src_lengths("train"));
  EXPECT_EQ(from_plain.tgt_lengths("train"), from_gzip.tgt_lengths("train"));
  const std::vector<int64_t> probes = {0, 65535, 65536, 131072, kPairs - 1};
  const auto gzip_pairs = from_gzip.read("train", probes);
  const auto plain_pairs = from_plain.read("train", probes);
  for (size_t i = 0; i < probes.size(); ++i) {
    EXPECT_EQ(gzip_pairs[i].src, plain_pairs[i].src) << "pair " << probes[i];
    EXPECT_EQ(gzip_pairs[i].tgt, plain_pairs[i].tgt) << "pair " << probes[i];
  }
}

}  // namespace
}  // namespace tandem::test
