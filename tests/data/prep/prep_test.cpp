#include "data/prep/prep.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <map>
#include <set>

#include "data/corpus/corpus.h"
#include "tests/data/test_corpus.h"
#include "trainer/common/token_ids.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::data {
namespace {

constexpr int64_t kMaxLen = 50;

// Bit-by-bit CRC-32 (reflected 0xEDB88320), independent of the table-driven one in prep.cpp.
uint32_t naive_crc32(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (const char byte : bytes) {
    crc ^= static_cast<uint8_t>(byte);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ ((crc & 1u) ? 0xEDB88320u : 0u);
  }
  return ~crc;
}

std::string long_line(int words) {
  std::string line = "hund";
  for (int i = 1; i < words; ++i) line += " katze";
  return line;
}

// A train split of 300 pairs with bad pairs injected at known places, and a valid split of 40.
class PrepRoundTrip : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    train_ = testing::synthetic_text(300, 1);
    train_.src[10] = "";
    train_.tgt[20] = "  \t ";
    train_.src[30] = "hund \xC3";              // truncated two-byte sequence
    train_.tgt[40] = "\xC0\xAF katze";         // overlong '/'
    train_.src[50] = "das \xED\xA0\x80 haus";  // UTF-16 surrogate
    train_.tgt[60] = long_line(120);
    expected_drop_ = {{10, "empty"},        {20, "empty"},        {30, "invalid_utf8"},
                      {40, "invalid_utf8"}, {50, "invalid_utf8"}, {60, "too_long"}};
    valid_ = testing::synthetic_text(40, 2);
    valid_.src[5] = "";
    testing::write_lines(dir_->file("train.src"), train_.src);
    testing::write_lines(dir_->file("train.tgt"), train_.tgt);
    testing::write_lines(dir_->file("valid.src"), valid_.src);
    testing::write_lines(dir_->file("valid.tgt"), valid_.tgt);
    summary_ = new PrepSummary(prepare_corpus(options()));
  }
  static void TearDownTestSuite() {
    delete summary_;
    delete dir_;
  }
  static PrepOptions options() {
    PrepOptions options;
    options.splits = {{"train", {dir_->file("train.src")}, {dir_->file("train.tgt")}},
                      {"valid", {dir_->file("valid.src")}, {dir_->file("valid.tgt")}}};
    options.out = dir_->file("corpus.h5");
    options.vocab = testing::small_vocab();
    options.max_len = kMaxLen;
    return options;
  }

  static testing::TempDir* dir_;
  static testing::SyntheticText train_, valid_;
  static std::map<int, std::string> expected_drop_;  // train line → reason
  static PrepSummary* summary_;
};

testing::TempDir* PrepRoundTrip::dir_ = nullptr;
testing::SyntheticText PrepRoundTrip::train_, PrepRoundTrip::valid_;
std::map<int, std::string> PrepRoundTrip::expected_drop_;
PrepSummary* PrepRoundTrip::summary_ = nullptr;

TEST_F(PrepRoundTrip, SummaryCountsEveryDroppedPairByReason) {
  ASSERT_EQ(summary_->splits.size(), 2u);
  const SplitSummary& train = summary_->splits[0];
  EXPECT_EQ(train.name, "train");
  EXPECT_EQ(train.lines, 300);
  EXPECT_EQ(train.kept, 294);
  EXPECT_EQ(train.dropped,
            (std::map<std::string, int64_t>{{"empty", 2}, {"invalid_utf8", 3}, {"too_long", 1}}));
  const SplitSummary& valid = summary_->splits[1];
  EXPECT_EQ(valid.lines, 40);
  EXPECT_EQ(valid.kept, 39);
  EXPECT_EQ(valid.dropped.at("empty"), 1);
  const std::string table = summary_->to_string();
  EXPECT_NE(table.find("invalid_utf8"), std::string::npos);
  EXPECT_NE(table.find("train"), std::string::npos);
  EXPECT_NE(table.find("294"), std::string::npos);
}

TEST_F(PrepRoundTrip, KeptPairsDecodeToTheirLinesInOrder) {
  const Corpus corpus(dir_->file("corpus.h5"));
  const Vocab vocab = corpus.vocab();
  EXPECT_EQ(vocab.size(), summary_->vocab_size);
  const std::vector<int32_t> src_lengths = corpus.src_lengths("train");
  const std::vector<int32_t> tgt_lengths = corpus.tgt_lengths("train");
  int64_t kept = 0, src_tokens = 0;
  for (int line = 0; line < 300; ++line) {
    if (expected_drop_.count(line) != 0) continue;
    const SentencePair pair = corpus.read("train", {kept}).at(0);
    EXPECT_EQ(pair.src, vocab.encode(train_.src[line], Side::kSource)) << "line " << line;
    EXPECT_EQ(vocab.decode(pair.src, Side::kSource), train_.src[line]);
    EXPECT_EQ(vocab.decode(pair.tgt, Side::kTarget), train_.tgt[line]);
    EXPECT_EQ(src_lengths.at(kept), static_cast<int32_t>(pair.src.size()));
    EXPECT_EQ(tgt_lengths.at(kept), static_cast<int32_t>(pair.tgt.size()));
    EXPECT_LE(static_cast<int64_t>(pair.tgt.size()), kMaxLen);
    src_tokens += static_cast<int64_t>(pair.src.size());
    ++kept;
  }
  EXPECT_EQ(corpus.size("train"), kept);
  EXPECT_EQ(summary_->splits[0].src_tokens, src_tokens);
  EXPECT_GT(static_cast<int64_t>(vocab.encode(train_.tgt[60], Side::kTarget).size()), kMaxLen);
}

// A given vocabulary (here a paired one: a model per side, one id table) is used as it is: each
// side's text through its own model, the same bytes in /vocab, and none trained.
TEST(Prep, AGivenPairedVocabularyEncodesEachSideWithItsModel) {
  testing::TempDir dir;
  const testing::SyntheticText text = testing::synthetic_text(100, 3);
  testing::write_lines(dir.file("train.src"), text.src);
  testing::write_lines(dir.file("train.tgt"), text.tgt);
  const Vocab paired = testing::paired_vocab(text.src, text.tgt);

  PrepOptions options;
  options.splits = {{"train", {dir.file("train.src")}, {dir.file("train.tgt")}}};
  options.out = dir.file("corpus.h5");
  options.vocab_bytes = paired.bytes();
  options.vocab_from = "imported.h5";
  EXPECT_EQ(prepare_corpus(options).vocab_size, paired.size());
  const Corpus corpus(options.out);
  EXPECT_EQ(corpus.vocab().bytes(), paired.bytes());
  const auto pairs = corpus.read("train", {0, 1, 2, 99});
  const int lines[] = {0, 1, 2, 99};
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(pairs[i].src, paired.encode(text.src[lines[i]], Side::kSource));
    EXPECT_EQ(pairs[i].tgt, paired.encode(text.tgt[lines[i]], Side::kTarget));
    EXPECT_EQ(paired.decode(pairs[i].tgt, Side::kTarget), text.tgt[lines[i]]);
  }
  h5::Handle file(H5Fopen(options.out.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(h5::read_string_attribute(file.get(), "vocab_from"), "imported.h5");
}

// A given vocabulary with language codes (an imported NLLB-200's): one corpus's --src-lang and
// --tgt-lang start each side with its code; an unknown code is refused naming the nearest, and
// languages for a vocabulary without codes are refused.
TEST(Prep, AVocabularyWithLanguageCodesStartsEachSideWithItsCode) {
  testing::TempDir dir;
  const testing::SyntheticText text = testing::synthetic_text(50, 4);
  testing::write_lines(dir.file("train.src"), text.src);
  testing::write_lines(dir.file("train.tgt"), text.tgt);
  const Vocab joint = Vocab::train(text.src, testing::small_vocab());
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < joint.size(); ++id) pieces.push_back(joint.piece(id));
  const auto eng = static_cast<int32_t>(pieces.size()), spa = eng + 1;
  pieces.insert(pieces.end(), {"eng_Latn", "spa_Latn"});
  const Vocab coded = Vocab::from_pair(joint.bytes(), joint.bytes(), pieces,
                                       {{{"eng_Latn", eng}, {"spa_Latn", spa}}, {}});
  PrepOptions options;
  options.splits = {{"train", {dir.file("train.src")}, {dir.file("train.tgt")}}};
  options.out = dir.file("corpus.h5");
  options.vocab_bytes = coded.bytes();
  options.vocab_from = "nllb.h5";
  options.src_lang = "eng_Latn";
  options.tgt_lang = "spa_Latn";
  prepare_corpus(options);
  const auto pairs = Corpus(options.out).read("train", {0, 7});
  const int lines[] = {0, 7};
  for (size_t i = 0; i < pairs.size(); ++i) {
    auto src = coded.encode(text.src[lines[i]], Side::kSource);
    auto tgt = coded.encode(text.tgt[lines[i]], Side::kTarget);
    src.insert(src.begin(), eng);
    tgt.insert(tgt.begin(), spa);
    EXPECT_EQ(pairs[i].src, src);
    EXPECT_EQ(pairs[i].tgt, tgt);
  }
  auto refused = [&](PrepOptions bad, const std::string& expected) {
    bad.out = dir.file("refused.h5");
    try {
      prepare_corpus(bad);
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_FALSE(std::filesystem::exists(bad.out));
  };
  PrepOptions typo = options;
  typo.tgt_lang = "spa_latn";
  refused(typo, "target language 'spa_latn' is not a code of the vocabulary of 'nllb.h5'");
  refused(typo, "the nearest: spa_Latn");
  PrepOptions none = options;
  none.src_lang.clear();
  refused(none, "no source language");
  PrepOptions plain = options;
  plain.vocab_bytes = joint.bytes();
  refused(plain, "--src-lang/--tgt-lang");
}

TEST_F(PrepRoundTrip, FileRecordsLayoutAndProvenance) {
  h5::QuietErrors quiet;
  h5::Handle file(H5Fopen(dir_->file("corpus.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  ASSERT_TRUE(file.valid());
  EXPECT_EQ(h5::read_string_attribute(file.get(), "format"), "tandem-corpus");
  EXPECT_EQ(h5::read_int_attribute(file.get(), "format_version"), 1);
  EXPECT_EQ(h5::read_int_attribute(file.get(), "vocab_size"), summary_->vocab_size);
  h5::Handle train(H5Gopen2(file.get(), "train", H5P_DEFAULT));
  ASSERT_TRUE(train.valid());
  EXPECT_EQ(h5::read_string_attribute(train.get(), "src_file"), dir_->file("train.src"));
  EXPECT_EQ(h5::read_int_attribute(train.get(), "lines"), 300);
  EXPECT_EQ(h5::read_int_attribute(train.get(), "kept"), 294);
  EXPECT_EQ(h5::read_int_attribute(train.get(), "dropped_invalid_utf8"), 3);
  EXPECT_EQ(h5::read_int_attribute(train.get(), "dropped_too_long"), 1);
  EXPECT_EQ(h5::read_int_attribute(train.get(), "src_crc32"),
            naive_crc32(testing::read_file(dir_->file("train.src"))));
  EXPECT_EQ(h5::read_int_attribute(train.get(), "tgt_crc32"),
            naive_crc32(testing::read_file(dir_->file("train.tgt"))));
  h5::Handle offsets(H5Dopen2(file.get(), "/train/tgt/offsets", H5P_DEFAULT));
  h5::Handle tokens(H5Dopen2(file.get(), "/train/tgt/tokens", H5P_DEFAULT));
  EXPECT_EQ(h5::dataset_length(offsets.get()), 295u);
  EXPECT_EQ(static_cast<int64_t>(h5::dataset_length(tokens.get())), summary_->splits[0].tgt_tokens);
  EXPECT_FALSE(std::filesystem::exists(dir_->file("corpus.h5.tmp")));
}

TEST_F(PrepRoundTrip, SameInputsGiveAByteIdenticalFile) {
  PrepOptions again = options();
  again.out = dir_->file("again.h5");
  prepare_corpus(again);
  EXPECT_EQ(testing::read_file(again.out), testing::read_file(dir_->file("corpus.h5")));
}

TEST(NaiveCrc32, MatchesTheStandardCheckValue) { EXPECT_EQ(naive_crc32("123456789"), 0xCBF43926u); }

TEST(PrepareCorpus, MismatchedLineCountsNameBothFilesAndCounts) {
  testing::TempDir dir;
  testing::write_lines(dir.file("a.src"), {"a", "b", "c", "d", "e"});
  testing::write_lines(dir.file("a.tgt"), {"a", "b", "c", "d"});
  testing::write_lines(dir.file("out.h5"), {"previous corpus"});
  PrepOptions options;
  options.splits = {{"train", {dir.file("a.src")}, {dir.file("a.tgt")}}};
  options.out = dir.file("out.h5");
  options.vocab = testing::small_vocab();
  try {
    prepare_corpus(options);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(dir.file("a.src") + "' has 5 lines"), std::string::npos) << message;
    EXPECT_NE(message.find(dir.file("a.tgt") + "' has 4"), std::string::npos) << message;
  }
  EXPECT_EQ(testing::read_file(dir.file("out.h5")), "previous corpus\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.h5.tmp")));
}

TEST(PrepareCorpus, MissingInputFileIsNamed) {
  testing::TempDir dir;
  testing::write_lines(dir.file("a.src"), {"a"});
  PrepOptions options;
  options.splits = {{"train", {dir.file("a.src")}, {dir.file("missing.tgt")}}};
  options.out = dir.file("out.h5");
  try {
    prepare_corpus(options);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(dir.file("missing.tgt")), std::string::npos) << e.what();
  }
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.h5")));
}

TEST(PrepareCorpus, UnwritableOutputIsNamed) {
  testing::TempDir dir;
  testing::write_lines(dir.file("a.src"), {"a"});
  testing::write_lines(dir.file("a.tgt"), {"a"});
  PrepOptions options;
  options.splits = {{"train", {dir.file("a.src")}, {dir.file("a.tgt")}}};
  options.out = dir.file("no_such_dir/out.h5");
  try {
    prepare_corpus(options);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find(options.out), std::string::npos) << e.what();
  }
}

TEST(PrepareCorpus, TrainSplitIsRequired) {
  PrepOptions options;
  options.splits = {{"valid", {"v.src"}, {"v.tgt"}}};
  options.out = "out.h5";
  EXPECT_THROW(prepare_corpus(options), std::invalid_argument);
}

// ---- streaming: threads, chunks, gzip and several files, positions of bad lines

void write_gzip(const std::string& path, const std::string& text) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  ASSERT_EQ(gzwrite(file, text.data(), static_cast<unsigned>(text.size())),
            static_cast<int>(text.size()));
  ASSERT_EQ(gzclose(file), Z_OK);
}

std::string joined(const std::vector<std::string>& lines, size_t begin, size_t end) {
  std::string text;
  for (size_t i = begin; i < end; ++i) text += lines[i] + "\n";
  return text;
}

// The token arrays and counts of a corpus file, for comparing files whose attributes differ.
std::map<std::string, std::vector<int64_t>> corpus_content(const std::string& path) {
  const Corpus corpus(path);
  std::map<std::string, std::vector<int64_t>> content;
  for (const std::string split : {"train", "valid"}) {
    if (!corpus.has_split(split)) continue;
    std::vector<int64_t> all(static_cast<size_t>(corpus.size(split)));
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    std::vector<int64_t>& flat = content[split];
    for (const SentencePair& pair : corpus.read(split, all)) {
      flat.push_back(-1);
      flat.insert(flat.end(), pair.src.begin(), pair.src.end());
      flat.push_back(-2);
      flat.insert(flat.end(), pair.tgt.begin(), pair.tgt.end());
    }
  }
  const std::string vocab = corpus.vocab().bytes();
  content["vocab"] = std::vector<int64_t>(vocab.begin(), vocab.end());
  return content;
}

class PrepStreaming : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = testing::synthetic_text(2000, 7);
    text_.src[333] = "hund \xC3";  // invalid UTF-8
    text_.tgt[1500] = "";
    testing::write_lines(dir_.file("train.src"), text_.src);
    testing::write_lines(dir_.file("train.tgt"), text_.tgt);
  }
  PrepOptions options(const std::string& out, int threads) const {
    PrepOptions options;
    options.splits = {{"train", {dir_.file("train.src")}, {dir_.file("train.tgt")}}};
    options.out = dir_.file(out);
    options.vocab = testing::small_vocab();
    options.threads = threads;
    options.chunk_pairs = 300;  // 7 chunks, the last one short
    return options;
  }

  testing::TempDir dir_;
  testing::SyntheticText text_;
};

TEST_F(PrepStreaming, OutputIsByteIdenticalAtOneTwoAndThreeThreads) {
  const PrepSummary one = prepare_corpus(options("one.h5", 1));
  prepare_corpus(options("two.h5", 2));
  prepare_corpus(options("three.h5", 3));
  const std::string bytes = testing::read_file(dir_.file("one.h5"));
  EXPECT_EQ(testing::read_file(dir_.file("two.h5")), bytes);
  EXPECT_EQ(testing::read_file(dir_.file("three.h5")), bytes);
  EXPECT_EQ(one.splits.at(0).kept, 1998);
  // Chunked encoding gives what one encoding of the whole text gives: each kept pair, in order.
  const Corpus corpus(dir_.file("one.h5"));
  const Vocab vocab = corpus.vocab();
  const std::vector<SentencePair> pairs = corpus.read("train", {0, 332, 333, 1997});
  EXPECT_EQ(pairs[0].src, vocab.encode(text_.src[0], Side::kSource));
  EXPECT_EQ(pairs[1].src, vocab.encode(text_.src[332], Side::kSource));
  EXPECT_EQ(pairs[2].src, vocab.encode(text_.src[334], Side::kSource));   // line 333 was skipped
  EXPECT_EQ(pairs[3].tgt, vocab.encode(text_.tgt[1999], Side::kTarget));  // and line 1500
  // Where the skipped pairs were, counted from 1 as editors do.
  EXPECT_EQ(one.splits.at(0).first_skipped,
            (std::vector<std::string>{"line 334 of '" + dir_.file("train.src") + "' / '" +
                                          dir_.file("train.tgt") + "': invalid_utf8",
                                      "line 1501 of '" + dir_.file("train.src") + "' / '" +
                                          dir_.file("train.tgt") + "': empty"}));
}

TEST_F(PrepStreaming, GzipAndSeveralFilesGiveWhatOnePlainFileGives) {
  prepare_corpus(options("plain.h5", 2));
  // Source: a gzip file then a plain one; target: cut elsewhere, plain then gzip.
  write_gzip(dir_.file("a.src.gz"), joined(text_.src, 0, 700));
  testing::write_lines(dir_.file("b.src"),
                       std::vector<std::string>(text_.src.begin() + 700, text_.src.end()));
  testing::write_lines(dir_.file("a.tgt"),
                       std::vector<std::string>(text_.tgt.begin(), text_.tgt.begin() + 1200));
  write_gzip(dir_.file("b.tgt.gz"), joined(text_.tgt, 1200, text_.tgt.size()));
  PrepOptions split = options("split.h5", 2);
  split.splits = {{"train",
                   {dir_.file("a.src.gz"), dir_.file("b.src")},
                   {dir_.file("a.tgt"), dir_.file("b.tgt.gz")}}};
  const PrepSummary summary = prepare_corpus(split);
  EXPECT_EQ(corpus_content(dir_.file("split.h5")), corpus_content(dir_.file("plain.h5")));
  // The checksum is of the text, decompressed and concatenated: the plain file's bytes.
  h5::QuietErrors quiet;
  h5::Handle file(H5Fopen(dir_.file("split.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  h5::Handle train(H5Gopen2(file.get(), "train", H5P_DEFAULT));
  EXPECT_EQ(h5::read_int_attribute(train.get(), "src_crc32"),
            naive_crc32(testing::read_file(dir_.file("train.src"))));
  EXPECT_EQ(h5::read_int_attribute(train.get(), "tgt_crc32"),
            naive_crc32(testing::read_file(dir_.file("train.tgt"))));
  EXPECT_EQ(h5::read_string_attribute(train.get(), "src_file"),
            dir_.file("a.src.gz") + " + " + dir_.file("b.src"));
  // Positions are within each file: source line 334 is in a.src.gz, target line 1501 in b.tgt.gz.
  ASSERT_EQ(summary.splits.at(0).first_skipped.size(), 2u);
  EXPECT_EQ(
      summary.splits.at(0).first_skipped[0],
      "line 334 of '" + dir_.file("a.src.gz") + "' / '" + dir_.file("a.tgt") + "': invalid_utf8");
  EXPECT_EQ(summary.splits.at(0).first_skipped[1], "line 801 of '" + dir_.file("b.src") +
                                                       "' / line 301 of '" + dir_.file("b.tgt.gz") +
                                                       "': empty");
}

TEST_F(PrepStreaming, ATruncatedGzipFileIsNamedWithTheLineWhereItBreaks) {
  write_gzip(dir_.file("whole.src.gz"), joined(text_.src, 0, text_.src.size()));
  const std::string whole = testing::read_file(dir_.file("whole.src.gz"));
  std::ofstream(dir_.file("cut.src.gz"), std::ios::binary) << whole.substr(0, whole.size() / 2);
  testing::write_lines(dir_.file("out.h5"), {"previous corpus"});
  PrepOptions cut = options("out.h5", 2);
  cut.splits[0].src = {dir_.file("cut.src.gz")};
  try {
    prepare_corpus(cut);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    const std::string message = e.what();
    EXPECT_NE(
        message.find("train source: cannot read '" + dir_.file("cut.src.gz") + "' after line "),
        std::string::npos)
        << message;
    EXPECT_NE(message.find("truncated"), std::string::npos) << message;
  }
  EXPECT_EQ(testing::read_file(dir_.file("out.h5")), "previous corpus\n");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("out.h5.tmp")));
}

TEST_F(PrepStreaming, AVocabularySampleIsSeededAndStillCoversTheText) {
  PrepOptions sampled = options("sampled.h5", 2);
  sampled.vocab.input_sentence_size = 500;  // of 3996 sentences
  prepare_corpus(sampled);
  sampled.out = dir_.file("again.h5");
  prepare_corpus(sampled);
  EXPECT_EQ(testing::read_file(dir_.file("again.h5")), testing::read_file(dir_.file("sampled.h5")));
  h5::QuietErrors quiet;
  h5::Handle file(H5Fopen(dir_.file("sampled.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  EXPECT_EQ(h5::read_int_attribute(file.get(), "vocab_sample"), 500);
  // The sample saw every word of the small word list, so nothing encodes to <unk>.
  const Corpus corpus(dir_.file("sampled.h5"));
  for (const SentencePair& pair : corpus.read("train", {0, 1, 2, 1000, 1997})) {
    for (const int32_t id : pair.src) EXPECT_NE(id, kUnkId);
  }
}

// A bad line deep in a large file is reported by its line number (the 1M-line case of the issue).
TEST(PrepLarge, ABadLineInTheMiddleOfAMillionLinesIsReportedByNumber) {
  testing::TempDir dir;
  constexpr int kLines = 1000000;
  constexpr int kBad = 654321;  // 0-based: line 654322 counted from 1
  {
    std::ofstream src(dir.file("big.src"), std::ios::binary);
    std::ofstream tgt(dir.file("big.tgt"), std::ios::binary);
    for (int i = 0; i < kLines; ++i) {
      src << (i == kBad ? "das \xED\xA0\x80 haus" : "der hund " + std::to_string(i % 97)) << "\n";
      tgt << "the dog " << i % 89 << "\n";
    }
  }
  PrepOptions options;
  options.splits = {{"train", {dir.file("big.src")}, {dir.file("big.tgt")}}};
  options.out = dir.file("big.h5");
  options.vocab = testing::small_vocab();
  options.vocab.input_sentence_size = 20000;
  const PrepSummary summary = prepare_corpus(options);
  EXPECT_EQ(summary.splits.at(0).lines, kLines);
  EXPECT_EQ(summary.splits.at(0).kept, kLines - 1);
  EXPECT_EQ(summary.splits.at(0).first_skipped,
            std::vector<std::string>{"line 654322 of '" + dir.file("big.src") + "' / '" +
                                     dir.file("big.tgt") + "': invalid_utf8"});
}

}  // namespace
}  // namespace tandem::data
