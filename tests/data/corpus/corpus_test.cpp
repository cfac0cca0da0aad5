#include "data/corpus/corpus.h"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "tests/data/test_corpus.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::data {
namespace {

// The message of the std::invalid_argument that opening `path` throws, or "" if none.
std::string open_error(const std::string& path) {
  try {
    Corpus corpus(path);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}

class CorpusRead : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    text_ = testing::synthetic_text(60, 3);
    path_ = testing::prepare_synthetic_corpus(*dir_, text_);
  }
  static void TearDownTestSuite() { delete dir_; }

  static testing::TempDir* dir_;
  static testing::SyntheticText text_;
  static std::string path_;
};

testing::TempDir* CorpusRead::dir_ = nullptr;
testing::SyntheticText CorpusRead::text_;
std::string CorpusRead::path_;

TEST_F(CorpusRead, ReadsRequestedSentencesInOrderWithRepeats) {
  const Corpus corpus(path_);
  const Vocab vocab = corpus.vocab();
  const std::vector<SentencePair> pairs = corpus.read("train", {42, 0, 42, 59, 2, 1, 3});
  ASSERT_EQ(pairs.size(), 7u);
  const int lines[] = {42, 0, 42, 59, 2, 1, 3};  // repeats, adjacent ranges
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(pairs[i].src, vocab.encode(text_.src[lines[i]], Side::kSource));
    EXPECT_EQ(pairs[i].tgt, vocab.encode(text_.tgt[lines[i]], Side::kTarget));
  }
}

// 60 sentences in a shuffled order: their ranges are read in groups (h5::read_ranges reads 32 a
// selection), and every sentence still lands where it was asked for.
TEST_F(CorpusRead, ReadsMoreSentencesThanOneSelectionHolds) {
  const Corpus corpus(path_);
  const Vocab vocab = corpus.vocab();
  std::vector<int64_t> lines(60);
  for (int64_t i = 0; i < 60; ++i) lines[i] = (i * 37) % 60;  // a permutation: 37 is prime to 60
  const std::vector<SentencePair> pairs = corpus.read("train", lines);
  ASSERT_EQ(pairs.size(), 60u);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(pairs[i].src, vocab.encode(text_.src[lines[i]], Side::kSource)) << lines[i];
    EXPECT_EQ(pairs[i].tgt, vocab.encode(text_.tgt[lines[i]], Side::kTarget)) << lines[i];
  }
}

TEST_F(CorpusRead, LengthsComeFromTheOffsets) {
  const Corpus corpus(path_);
  const Vocab vocab = corpus.vocab();
  ASSERT_EQ(corpus.size("train"), 60);
  const std::vector<int32_t> src = corpus.src_lengths("train");
  const std::vector<int32_t> tgt = corpus.tgt_lengths("train");
  ASSERT_EQ(src.size(), 60u);
  for (int i = 0; i < 60; ++i) {
    EXPECT_EQ(src[i], static_cast<int32_t>(vocab.encode(text_.src[i], Side::kSource).size()));
    EXPECT_EQ(tgt[i], static_cast<int32_t>(vocab.encode(text_.tgt[i], Side::kTarget).size()));
  }
}

TEST_F(CorpusRead, KnowsWhichSplitsItHas) {
  const Corpus corpus(path_);
  EXPECT_TRUE(corpus.has_split("train"));
  EXPECT_FALSE(corpus.has_split("valid"));
  EXPECT_THROW(corpus.size("valid"), std::invalid_argument);
}

TEST_F(CorpusRead, OutOfRangeIndexIsRejected) {
  const Corpus corpus(path_);
  EXPECT_THROW(corpus.read("train", {60}), std::invalid_argument);
  EXPECT_THROW(corpus.read("train", {-1}), std::invalid_argument);
}

TEST(CorpusOpen, MissingFileIsNamed) {
  testing::TempDir dir;
  const std::string message = open_error(dir.file("absent.h5"));
  EXPECT_NE(message.find(dir.file("absent.h5")), std::string::npos) << message;
}

TEST(CorpusOpen, TextFileIsNotHdf5AndNothingElseIsPrinted) {
  testing::TempDir dir;
  testing::write_lines(dir.file("corpus.txt"), {"hello"});
  ::testing::internal::CaptureStderr();
  const std::string message = open_error(dir.file("corpus.txt"));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(message.find(dir.file("corpus.txt")), std::string::npos) << message;
  EXPECT_NE(message.find("not an HDF5 file"), std::string::npos) << message;
}

TEST(CorpusOpen, Hdf5FileWithoutFormatIsNotACorpus) {
  testing::TempDir dir;
  const std::string path = dir.file("other.h5");
  h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
  file.close();
  ::testing::internal::CaptureStderr();
  const std::string message = open_error(path);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("tandem-corpus"), std::string::npos) << message;
}

// A list where Tandem writes one value: found by tests/fuzz/corpus_fuzz.cpp, when format_version
// held 66 integers HDF5 wrote all 528 bytes into the reader's one int64 (a stack overflow under
// ASan). Now such an attribute or string dataset reads as absent.
TEST(CorpusOpen, AnAttributeThatIsAListWhereOneValueBelongsReadsAsAbsent) {
  testing::TempDir dir;
  const std::string path = dir.file("list.h5");
  {
    h5::Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    h5::write_attribute(file.get(), "format", std::string("tandem-corpus"));
    const hsize_t count = 66;
    const std::vector<int64_t> versions(count, 1);
    h5::Handle space(H5Screate_simple(1, &count, nullptr));
    h5::Handle attribute(H5Acreate2(file.get(), "format_version", H5T_STD_I64LE, space.get(),
                                    H5P_DEFAULT, H5P_DEFAULT));
    ASSERT_GE(H5Awrite(attribute.get(), H5T_NATIVE_INT64, versions.data()), 0);
    h5::Handle strings(H5Dcreate2(file.get(), "text", H5T_C_S1, space.get(), H5P_DEFAULT,
                                  H5P_DEFAULT, H5P_DEFAULT));
    EXPECT_EQ(h5::read_int_attribute(file.get(), "format_version"), std::nullopt);
    EXPECT_EQ(h5::read_string_dataset(file.get(), "text"), std::nullopt);
  }
  const std::string message = open_error(path);
  EXPECT_NE(message.find("format_version (missing) is not supported"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace tandem::data
