// Several corpora in one file (tandem-prep --corpora): each corpus's pairs in its own range of
// each split, its source sentences led by its target language's tag, one vocabulary for all
// sampled across languages; the manifest read and refused key by key; bad corpora named.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/prep/manifest.h"
#include "data/prep/prep.h"
#include "tests/data/test_corpus.h"
#include "trainer/common/token_ids.h"

namespace tandem::data {
namespace {

// Two directions of the synthetic text: "de" → "en" (300 pairs, a valid split of 40) and
// "en" → "de" (100 other pairs, no valid split).
class Corpora : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    forward_ = testing::synthetic_text(300, 1);
    backward_ = testing::synthetic_text(100, 7);
    valid_ = testing::synthetic_text(40, 2);
    testing::write_lines(dir_->file("fw.de"), forward_.src);
    testing::write_lines(dir_->file("fw.en"), forward_.tgt);
    testing::write_lines(dir_->file("bw.en"), backward_.tgt);
    testing::write_lines(dir_->file("bw.de"), backward_.src);
    testing::write_lines(dir_->file("valid.de"), valid_.src);
    testing::write_lines(dir_->file("valid.en"), valid_.tgt);
    summary_ = new PrepSummary(prepare_corpus(options()));
  }
  static void TearDownTestSuite() {
    delete summary_;
    delete dir_;
  }
  static PrepOptions options() {
    PrepOptions options;
    options.corpora = {
        {"de-en",
         "de",
         "en",
         {{"train", {dir_->file("fw.de")}, {dir_->file("fw.en")}},
          {"valid", {dir_->file("valid.de")}, {dir_->file("valid.en")}}}},
        {"en-de", "en", "de", {{"train", {dir_->file("bw.en")}, {dir_->file("bw.de")}}}}};
    options.out = dir_->file("corpora.h5");
    options.vocab = testing::small_vocab();
    return options;
  }

  static testing::TempDir* dir_;
  static testing::SyntheticText forward_, backward_, valid_;
  static PrepSummary* summary_;
};
testing::TempDir* Corpora::dir_ = nullptr;
testing::SyntheticText Corpora::forward_, Corpora::backward_, Corpora::valid_;
PrepSummary* Corpora::summary_ = nullptr;

TEST_F(Corpora, EachTargetLanguageHasATagOfItsOwnAfterTheSpecials) {
  const Vocab vocab = Corpus(dir_->file("corpora.h5")).vocab();
  EXPECT_EQ(vocab.language_tags(), (std::vector<std::string>{">>en<<", ">>de<<"}));
  EXPECT_EQ(vocab.tag_id(">>en<<"), kEosId + 1);
  EXPECT_EQ(vocab.tag_id(">>de<<"), kEosId + 2);
  EXPECT_EQ(vocab.tag_id(">>fr<<"), -1);
  ASSERT_EQ(summary_->tags.size(), 2u);
  EXPECT_EQ(summary_->tags[0], (std::pair<std::string, int32_t>{">>en<<", kEosId + 1}));
  // Typed by hand, a tag is that one piece, then the sentence as without it.
  const std::vector<int32_t> plain = vocab.encode("der hund", Side::kSource);
  std::vector<int32_t> tagged = {vocab.tag_id(">>de<<")};
  tagged.insert(tagged.end(), plain.begin(), plain.end());
  EXPECT_EQ(vocab.encode(">>de<< der hund", Side::kSource), tagged);
  EXPECT_EQ(vocab.encode(">>fr<< der hund", Side::kSource).front(), kUnkId);
}

TEST_F(Corpora, EachCorpusHasItsRangeAndItsSourcesStartWithItsTag) {
  const Corpus corpus(dir_->file("corpora.h5"));
  const Vocab vocab = corpus.vocab();
  const Directions& parts = corpus.directions();
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_TRUE(parts.several());
  EXPECT_EQ(parts[0].name, "de-en");
  EXPECT_EQ(parts[0].src_lang, "de");
  EXPECT_EQ(parts[0].tgt_lang, "en");
  EXPECT_EQ(parts[0].tag, ">>en<<");
  EXPECT_EQ(parts[1].name, "en-de");
  EXPECT_EQ(parts[1].tag, ">>de<<");
  EXPECT_EQ(parts[0].range("train")->first, 0);
  EXPECT_EQ(parts[0].range("train")->count, 300);
  EXPECT_EQ(parts[1].range("train")->first, 300);
  EXPECT_EQ(parts[1].range("train")->count, 100);
  EXPECT_EQ(parts[0].range("valid")->count, 40);
  EXPECT_EQ(parts[1].range("valid"), nullptr);
  EXPECT_EQ(parts.names(), (std::vector<std::string>{"de-en", "en-de"}));
  EXPECT_EQ(corpus.size("train"), 400);
  EXPECT_EQ(corpus.size("valid"), 40);

  const auto expect_pair = [&](int64_t index, const std::string& src, const std::string& tgt,
                               const std::string& tag) {
    const SentencePair pair = corpus.read("train", {index}).at(0);
    std::vector<int32_t> want = {vocab.tag_id(tag)};
    const std::vector<int32_t> plain = vocab.encode(src, Side::kSource);
    want.insert(want.end(), plain.begin(), plain.end());
    EXPECT_EQ(pair.src, want) << "train pair " << index;
    EXPECT_EQ(pair.tgt, vocab.encode(tgt, Side::kTarget)) << "train pair " << index;
  };
  for (int64_t k : {0, 1, 150, 299}) expect_pair(k, forward_.src[k], forward_.tgt[k], ">>en<<");
  for (int64_t k : {0, 1, 99}) {
    expect_pair(300 + k, backward_.tgt[k], backward_.src[k], ">>de<<");
  }
  ASSERT_EQ(summary_->corpora.size(), 2u);
  EXPECT_EQ(summary_->corpora[1].first, "en-de");
  EXPECT_EQ(summary_->corpora[1].second.at(0).kept, 100);
  EXPECT_EQ(summary_->splits.at(0).kept, 400);  // train, over both
  EXPECT_NE(summary_->to_string().find("en-de train"), std::string::npos) << summary_->to_string();
}

TEST_F(Corpora, AFileOfOneCorpusIsOneWholeCorpus) {
  testing::TempDir dir;
  const std::string path = testing::prepare_synthetic_corpus(dir, forward_);
  const Corpus corpus(path);
  const Directions& parts = corpus.directions();
  ASSERT_EQ(parts.size(), 1u);
  EXPECT_FALSE(parts.several());
  EXPECT_TRUE(parts.names().empty());
  EXPECT_EQ(parts[0].name, "");
  EXPECT_EQ(parts[0].tag, "");
  EXPECT_EQ(parts[0].range("train")->first, 0);
  EXPECT_EQ(parts[0].range("train")->count, corpus.size("train"));
  EXPECT_TRUE(corpus.vocab().language_tags().empty());
}

// Corpora of one target language (one pair from several sources, mixed by weight) need no tag.
TEST_F(Corpora, OneTargetLanguageGetsNoTag) {
  PrepOptions options = this->options();
  options.corpora[1] = {
      "more", "de", "en", {{"train", {dir_->file("bw.de")}, {dir_->file("bw.en")}}}};
  options.out = dir_->file("one-target.h5");
  const PrepSummary summary = prepare_corpus(options);
  EXPECT_TRUE(summary.tags.empty());
  const Corpus corpus(options.out);
  EXPECT_TRUE(corpus.vocab().language_tags().empty());
  EXPECT_EQ(corpus.read("train", {300}).at(0).src,
            corpus.vocab().encode(backward_.src[0], Side::kSource));
}

// A small language's text is a small share of all text; the vocabulary's sample is balanced
// across languages, so its characters are all in a small vocabulary all the same.
TEST_F(Corpora, ALanguageWithLittleTextStillGetsItsPieces) {
  const std::string letters[] = {"α", "β", "γ", "δ", "ε", "ζ", "η", "θ", "ι", "κ",
                                 "λ", "μ", "ν", "ξ", "ο", "π", "ρ", "σ", "τ", "υ"};
  std::vector<std::string> greek, english;
  for (int k = 0; k < 20; ++k) {
    std::string word;
    for (int c = 0; c < 3; ++c) word += letters[(k * 7 + c * 3) % 20];
    greek.push_back(word + " " + letters[k]);
    english.push_back(forward_.tgt[k]);
  }
  testing::write_lines(dir_->file("small.el"), greek);
  testing::write_lines(dir_->file("small.en"), english);
  PrepOptions options = this->options();
  options.corpora.push_back(
      {"el-en", "el", "en", {{"train", {dir_->file("small.el")}, {dir_->file("small.en")}}}});
  options.vocab.input_sentence_size = 150;  // 50 a language (de, en, el): every Greek line
  options.out = dir_->file("three.h5");
  prepare_corpus(options);
  const Vocab vocab = Corpus(options.out).vocab();
  for (const std::string& line : greek) {
    for (const int32_t id : vocab.encode(line, Side::kSource)) {
      EXPECT_NE(id, kUnkId) << line;
    }
  }
}

// ---- bad input: one line naming the corpus, the file or the key

std::string error_of(const PrepOptions& options) {
  try {
    prepare_corpus(options);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST_F(Corpora, BadCorporaAreNamed) {
  PrepOptions twice = options();
  twice.corpora[1].name = "de-en";
  EXPECT_EQ(error_of(twice), "corpus 'de-en' is given twice");
  PrepOptions bad_name = options();
  bad_name.corpora[0].name = "de/en";
  EXPECT_EQ(error_of(bad_name), "corpus name 'de/en': expected letters, digits, '.', '_' or '-'");
  PrepOptions bad_language = options();
  bad_language.corpora[1].tgt_lang = "";
  EXPECT_EQ(error_of(bad_language),
            "corpus 'en-de': tgt_lang '': expected a language code (letters, digits, '_', '-')");
  PrepOptions no_train = options();
  no_train.corpora[1].splits[0].name = "test";
  EXPECT_EQ(error_of(no_train), "corpus 'en-de': the train split is required");
  PrepOptions both = options();
  both.splits = {{"train", {dir_->file("fw.de")}, {dir_->file("fw.en")}}};
  EXPECT_EQ(error_of(both), "give either one corpus's splits or several corpora");

  testing::write_lines(dir_->file("short.de"), {"der hund", "die katze"});
  PrepOptions mismatched = options();
  mismatched.corpora[1].splits[0].src = {dir_->file("short.de")};
  mismatched.out = dir_->file("never.h5");
  const std::string message = error_of(mismatched);
  EXPECT_NE(message.find("corpus 'en-de' train split: '" + dir_->file("short.de") +
                         "' has 2 lines but '" + dir_->file("bw.de") + "' has 100"),
            std::string::npos)
      << message;
  EXPECT_FALSE(std::filesystem::exists(dir_->file("never.h5")));
  EXPECT_FALSE(std::filesystem::exists(dir_->file("never.h5.tmp")));
}

TEST_F(Corpora, AGivenVocabularyMustHaveTheTags) {
  testing::TempDir dir;
  const std::string plain = testing::prepare_synthetic_corpus(dir, forward_);
  PrepOptions options = this->options();
  options.vocab_bytes = Corpus(plain).vocab().bytes();
  options.vocab_from = plain;
  options.out = dir_->file("from.h5");
  EXPECT_EQ(error_of(options), "the vocabulary of '" + plain +
                                   "' has no piece '>>en<<' for the corpora's target language");
  // A multilingual file's vocabulary has them: its corpora prepare again with it.
  options.vocab_bytes = Corpus(dir_->file("corpora.h5")).vocab().bytes();
  options.vocab_from = dir_->file("corpora.h5");
  const PrepSummary again = prepare_corpus(options);
  EXPECT_EQ(again.tags, summary_->tags);
  EXPECT_EQ(Corpus(options.out).read("train", {300}).at(0).src,
            Corpus(dir_->file("corpora.h5")).read("train", {300}).at(0).src);
}

// An imported multilingual MarianMT (OPUS-MT) vocabulary: a paired one whose id table lists the
// tags, as its vocab.json does. Its corpora prepare with it, each source led by its tag's id in
// that table, as MarianTokenizer would tokenize ">>de<< ..." (the paired encode of the tagged
// line).
TEST_F(Corpora, AnImportedMultilingualVocabularyKeepsItsTags) {
  const Vocab paired =
      testing::paired_vocab(forward_.src, forward_.tgt, {">>de<<", ">>en<<", ">>fr<<"});
  EXPECT_EQ(paired.language_tags(), (std::vector<std::string>{">>de<<", ">>en<<", ">>fr<<"}));
  PrepOptions options = this->options();
  options.vocab_bytes = paired.bytes();
  options.vocab_from = "opus-mt-mul.h5";
  options.out = dir_->file("imported.h5");
  const PrepSummary summary = prepare_corpus(options);
  EXPECT_EQ(summary.tags,
            (std::vector<std::pair<std::string, int32_t>>{{">>en<<", 5}, {">>de<<", 4}}));
  const Corpus corpus(options.out);
  EXPECT_EQ(corpus.vocab().bytes(), paired.bytes());
  EXPECT_EQ(corpus.read("train", {7}).at(0).src,
            paired.encode(">>en<< " + forward_.src[7], Side::kSource));
  EXPECT_EQ(corpus.read("train", {301}).at(0).src,
            paired.encode(">>de<< " + backward_.tgt[1], Side::kSource));
}

// ---- the manifest

std::string manifest_error(const testing::TempDir& dir, const std::string& text) {
  testing::write_lines(dir.file("m.yaml"), {text});
  try {
    read_corpora_manifest(dir.file("m.yaml"));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(CorporaManifest, ReadsEachCorpusWithPathsBesideTheManifest) {
  testing::TempDir dir;
  testing::write_lines(
      dir.file("m.yaml"),
      {"corpora:", "  - name: en-es", "    src_lang: en", "    tgt_lang: es",
       "    train: {src: [a.en, /data/b.en], tgt: [a.es, /data/b.es]}",
       "    test: {src: t.en, tgt: t.es, align: t.align}", "  - name: es-en", "    src_lang: es",
       "    tgt_lang: en", "    train: {src: a.es, tgt: a.en}"});
  const std::vector<CorpusFiles> corpora = read_corpora_manifest(dir.file("m.yaml"));
  ASSERT_EQ(corpora.size(), 2u);
  EXPECT_EQ(corpora[0].name, "en-es");
  EXPECT_EQ(corpora[0].src_lang, "en");
  EXPECT_EQ(corpora[0].tgt_lang, "es");
  ASSERT_EQ(corpora[0].splits.size(), 2u);
  EXPECT_EQ(corpora[0].splits[0].name, "train");
  EXPECT_EQ(corpora[0].splits[0].src, (std::vector<std::string>{dir.file("a.en"), "/data/b.en"}));
  EXPECT_EQ(corpora[0].splits[1].name, "test");
  EXPECT_EQ(corpora[0].splits[1].tgt, (std::vector<std::string>{dir.file("t.es")}));
  EXPECT_TRUE(corpora[0].splits[0].align.empty());
  EXPECT_EQ(corpora[0].splits[1].align, (std::vector<std::string>{dir.file("t.align")}));
  EXPECT_EQ(corpora[1].splits[0].src, (std::vector<std::string>{dir.file("a.es")}));
}

TEST(CorporaManifest, MistakesAreNamedWithTheirLineAndKey) {
  testing::TempDir dir;
  const std::string m = dir.file("m.yaml");
  EXPECT_EQ(manifest_error(dir, "corpus: []"), m + ":1:1: unknown key 'corpus' (expected corpora)");
  EXPECT_EQ(manifest_error(dir, "corpora: []"),
            m + ":1:10: corpora: expected a list of at least one corpus");
  EXPECT_EQ(manifest_error(dir,
                           "corpora:\n  - name: a\n    src_lang: en\n    tgt_lang: es\n"
                           "    train: {src: a.en, tgt: a.es}\n    weight: 2"),
            m + ":6:5: corpus 'a': unknown key 'weight' (expected name, src_lang, tgt_lang, "
                "train, valid, test)");
  EXPECT_EQ(manifest_error(dir, "corpora:\n  - name: a\n    src_lang: en\n    tgt_lang: es"),
            m + ":2:5: corpus 'a': missing train");
  EXPECT_EQ(manifest_error(dir,
                           "corpora:\n  - name: a\n    src_lang: en\n    tgt_lang: es\n"
                           "    train: {src: a.en}"),
            m + ":5:12: corpus 'a': train: needs both src and tgt");
  EXPECT_EQ(manifest_error(dir,
                           "corpora:\n  - src_lang: en\n    tgt_lang: es\n"
                           "    train: {src: a.en, tgt: a.es}"),
            m + ":2:5: corpus 1: missing name");
  EXPECT_EQ(manifest_error(dir, "corpora: [\n"),
            m + ":3:1: YAML syntax error: end of sequence flow not found");
  EXPECT_NE(manifest_error(dir, "").find("expected a map with the key corpora"), std::string::npos);
}

}  // namespace
}  // namespace tandem::data
