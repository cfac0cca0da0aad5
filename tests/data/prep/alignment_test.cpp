// Word alignments in tandem-prep: Pharaoh lines parsed and refused field by field, word links
// mapped to piece links by hand-made cases, and a prepared corpus's links read back against links
// computed independently from the stored pieces' texts (a word starts at each "▁"), skipped pairs
// and a corpus without alignments beside one with them included; bad lines named by file and line.
#include "data/prep/alignment.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "data/corpus/corpus.h"
#include "data/prep/prep.h"
#include "tests/data/test_corpus.h"

namespace tandem::data {
namespace {

std::vector<std::pair<int32_t, int32_t>> pairs_of(const std::vector<WordLink>& links) {
  std::vector<std::pair<int32_t, int32_t>> pairs;
  for (const WordLink& link : links) pairs.emplace_back(link.src, link.tgt);
  return pairs;
}

std::string refusal(const std::string& line, size_t src_words, size_t tgt_words) {
  try {
    parse_pharaoh(line, src_words, tgt_words);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(accepted)";
}

TEST(Pharaoh, LinksAreSourceWordDashTargetWordBetweenWhiteSpace) {
  using Pairs = std::vector<std::pair<int32_t, int32_t>>;
  EXPECT_EQ(pairs_of(parse_pharaoh("0-0 1-2\t 2-1 ", 3, 3)), (Pairs{{0, 0}, {1, 2}, {2, 1}}));
  EXPECT_EQ(pairs_of(parse_pharaoh("10-0", 11, 1)), (Pairs{{10, 0}}));
  EXPECT_TRUE(parse_pharaoh("", 3, 3).empty());
  EXPECT_TRUE(parse_pharaoh("  \t", 3, 3).empty());
}

TEST(Pharaoh, AFieldThatIsNotALinkOrNamesAWordPastItsSentenceIsRefused) {
  EXPECT_EQ(refusal("0-0 1:1", 3, 3),
            "link '1:1': expected i-j (source word - target word, from 0)");
  EXPECT_EQ(refusal("a-1", 3, 3),
            "link 'a-1': expected i-j with whole numbers from 0 (source word - target word)");
  EXPECT_EQ(refusal("1-", 3, 3),
            "link '1-': expected i-j with whole numbers from 0 (source word - target word)");
  EXPECT_EQ(refusal("1--2", 3, 3),
            "link '1--2': expected i-j with whole numbers from 0 (source word - target word)");
  EXPECT_EQ(refusal("0-0 3-1", 3, 3),
            "link '3-1': source word 3 is past the line's 3 words (counted from 0, split at white "
            "space)");
  EXPECT_EQ(refusal("0-2", 3, 2),
            "link '0-2': target word 2 is past the line's 2 words (counted from 0, split at white "
            "space)");
}

TEST(PieceLinks, EveryPieceOfAWordInheritsItsLinksSortedByTargetThenSource) {
  // Source: a mark, then word 0 in two pieces, word 1 in one; target: word 0, word 1 in two.
  const std::vector<int32_t> src_words = {-1, 0, 0, 1};
  const std::vector<int32_t> tgt_words = {0, 1, 1};
  const std::vector<WordLink> links = {{0, 1}, {1, 0}, {0, 1}};  // a repeated link counts once
  EXPECT_EQ(piece_links(links, src_words, tgt_words),
            (std::vector<int32_t>{3, 0, 1, 1, 2, 1, 1, 2, 2, 2}));
  // A word without pieces (the normalizer removed it) links nothing.
  EXPECT_EQ(piece_links({{2, 0}, {1, 0}}, {0, 1}, {0}), (std::vector<int32_t>{1, 0}));
  EXPECT_TRUE(piece_links({}, src_words, tgt_words).empty());
}

// The word each stored piece opens or continues, from the pieces' texts: a new word at each "▁"
// (plain ASCII text with single spaces); -1 for the pieces before the first (a language mark).
std::vector<int32_t> words_from_pieces(const Vocab& vocab, const std::vector<int32_t>& tokens) {
  std::vector<int32_t> words;
  int32_t word = -1;
  for (const int32_t id : tokens) {
    const std::string piece = vocab.piece(id);
    if (vocab.special(id) || piece.rfind(">>", 0) == 0) {
      words.push_back(-1);
      continue;
    }
    if (piece.rfind("\xE2\x96\x81", 0) == 0) ++word;
    words.push_back(word);
  }
  return words;
}

// The piece links of word links, by a naive loop over every pair of pieces.
std::vector<int32_t> naive_links(const std::vector<std::pair<int, int>>& word_links,
                                 const std::vector<int32_t>& src_words,
                                 const std::vector<int32_t>& tgt_words) {
  std::vector<int32_t> flat;
  for (size_t q = 0; q < tgt_words.size(); ++q) {
    for (size_t p = 0; p < src_words.size(); ++p) {
      for (const auto& [i, j] : word_links) {
        if (src_words[p] == i && tgt_words[q] == j) {
          flat.insert(flat.end(), {static_cast<int32_t>(p), static_cast<int32_t>(q)});
          break;
        }
      }
    }
  }
  return flat;
}

// Word links for the synthetic word-for-word text: i-i for every word, and i-(i+1) for every
// third; every fifth line none.
std::vector<std::pair<int, int>> word_links_for(const std::string& src, size_t line) {
  std::vector<std::pair<int, int>> links;
  if (line % 5 == 4) return links;
  const int words = static_cast<int>(std::count(src.begin(), src.end(), ' ')) + 1;
  for (int i = 0; i < words; ++i) {
    links.emplace_back(i, i);
    if (i % 3 == 0 && i + 1 < words) links.emplace_back(i, i + 1);
  }
  return links;
}

std::string pharaoh(const std::vector<std::pair<int, int>>& links) {
  std::string line;
  for (const auto& [i, j] : links) {
    line += (line.empty() ? "" : " ") + std::to_string(i) + "-" + std::to_string(j);
  }
  return line;
}

class AlignedPrep : public ::testing::Test {
 protected:
  void SetUp() override {
    text_ = testing::synthetic_text(200, 3);
    text_.src[7] = "";  // skipped (empty): its alignment line goes with it
    const std::string eighth = text_.src[8];
    for (int copy = 1; copy < 40; ++copy) text_.src[8] += " " + eighth;  // skipped: too long
    for (size_t i = 0; i < text_.src.size(); ++i) {
      links_.push_back(word_links_for(text_.src[i], i));
    }
    links_[8].clear();  // its words are more than the target's
    std::vector<std::string> lines;
    for (const auto& links : links_) lines.push_back(pharaoh(links));
    testing::write_lines(dir_.file("train.src"), text_.src);
    testing::write_lines(dir_.file("train.tgt"), text_.tgt);
    testing::write_lines(dir_.file("train.align"), lines);
    testing::write_lines(dir_.file("other.src"), testing::synthetic_text(30, 9).src);
    testing::write_lines(dir_.file("other.tgt"), testing::synthetic_text(30, 9).tgt);
  }
  PrepOptions options() const {
    PrepOptions options;
    options.splits = {
        {"train", {dir_.file("train.src")}, {dir_.file("train.tgt")}, {dir_.file("train.align")}}};
    options.out = dir_.file("aligned.h5");
    options.vocab = testing::small_vocab();
    options.vocab.vocab_size = 30;  // words in several pieces
    options.max_len = 60;           // above 9 words of at most 6 pieces; below 80 words
    return options;
  }
  // Each kept pair's links against the naive ones of the line it came from.
  void expect_links_of_lines(const Corpus& corpus, const std::vector<size_t>& lines,
                             int64_t first) {
    const Vocab vocab = corpus.vocab();
    std::vector<int64_t> indices(lines.size());
    for (size_t k = 0; k < lines.size(); ++k) indices[k] = first + static_cast<int64_t>(k);
    const std::vector<SentencePair> pairs = corpus.read("train", indices, Corpus::Links::kRead);
    for (size_t k = 0; k < lines.size(); ++k) {
      const std::vector<int32_t> src_words = words_from_pieces(vocab, pairs[k].src);
      const std::vector<int32_t> tgt_words = words_from_pieces(vocab, pairs[k].tgt);
      EXPECT_EQ(pairs[k].links, naive_links(links_[lines[k]], src_words, tgt_words))
          << "line " << lines[k];
    }
  }
  std::vector<size_t> kept_lines() const {
    std::vector<size_t> kept;
    for (size_t i = 0; i < text_.src.size(); ++i) {
      if (i != 7 && i != 8) kept.push_back(i);
    }
    return kept;
  }

  testing::TempDir dir_;
  testing::SyntheticText text_;
  std::vector<std::vector<std::pair<int, int>>> links_;
};

TEST_F(AlignedPrep, EachKeptPairHasTheLinksOfItsLineBetweenItsPieces) {
  const PrepSummary summary = prepare_corpus(options());
  const Corpus corpus(dir_.file("aligned.h5"));
  ASSERT_TRUE(corpus.has_alignments("train"));
  ASSERT_EQ(corpus.size("train"), 198);
  expect_links_of_lines(corpus, kept_lines(), 0);
  // Some words are several pieces, so links are more than word links.
  int64_t word_links = 0, aligned = 0;
  for (const size_t line : kept_lines()) {
    word_links += static_cast<int64_t>(links_[line].size());
    aligned += links_[line].empty() ? 0 : 1;
  }
  EXPECT_GT(summary.splits[0].links, word_links);
  EXPECT_EQ(summary.splits[0].aligned, aligned);
  // Without Links::kRead, none are read.
  EXPECT_TRUE(corpus.read("train", {0})[0].links.empty());
}

TEST_F(AlignedPrep, BesideACorpusWithoutAlignmentsItsPairsHaveNoneAndTheTagIsNoWord) {
  PrepOptions options = this->options();
  options.corpora = {
      {"de-en", "de", "en", options.splits},
      {"en-de", "en", "de", {{"train", {dir_.file("other.tgt")}, {dir_.file("other.src")}}}}};
  options.splits.clear();
  prepare_corpus(options);
  const Corpus corpus(dir_.file("aligned.h5"));
  ASSERT_TRUE(corpus.has_alignments("train"));
  ASSERT_EQ(corpus.size("train"), 228);
  expect_links_of_lines(corpus, kept_lines(), 0);
  const std::vector<SentencePair> first = corpus.read("train", {0}, Corpus::Links::kRead);
  EXPECT_EQ(first[0].src[0], corpus.vocab().tag_id(">>en<<"));
  for (int64_t pair = 198; pair < 228; ++pair) {
    EXPECT_TRUE(corpus.read("train", {pair}, Corpus::Links::kRead)[0].links.empty()) << pair;
  }
}

// The corpus without alignments first: its 30 pairs have none, and the aligned corpus's links
// follow them in step.
TEST_F(AlignedPrep, AfterACorpusWithoutAlignmentsTheAlignedCorpusKeepsItsLinks) {
  PrepOptions options = this->options();
  options.corpora = {
      {"en-de", "en", "de", {{"train", {dir_.file("other.tgt")}, {dir_.file("other.src")}}}},
      {"de-en", "de", "en", options.splits}};
  options.splits.clear();
  const PrepSummary summary = prepare_corpus(options);
  const Corpus corpus(dir_.file("aligned.h5"));
  ASSERT_TRUE(corpus.has_alignments("train"));
  ASSERT_EQ(corpus.size("train"), 228);
  for (int64_t pair = 0; pair < 30; ++pair) {
    EXPECT_TRUE(corpus.read("train", {pair}, Corpus::Links::kRead)[0].links.empty()) << pair;
  }
  expect_links_of_lines(corpus, kept_lines(), 30);
  EXPECT_EQ(summary.corpora[0].second[0].aligned, -1);  // the en-de part was given none
  EXPECT_EQ(summary.splits[0].aligned, summary.corpora[1].second[0].aligned);
}

std::string prep_error(const PrepOptions& options) {
  try {
    prepare_corpus(options);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "(prepared)";
}

TEST_F(AlignedPrep, ALinkPastItsSentenceIsNamedByFileAndLineAndNothingIsWritten) {
  std::vector<std::string> lines;
  for (const auto& links : links_) lines.push_back(pharaoh(links));
  lines[120] += " 0-17";  // the synthetic lines have at most 9 words
  testing::write_lines(dir_.file("train.align"), lines);
  EXPECT_EQ(prep_error(options()),
            "line 121 of '" + dir_.file("train.align") +
                "' (train alignments): link '0-17': target word 17 is past the line's " +
                std::to_string(std::count(text_.tgt[120].begin(), text_.tgt[120].end(), ' ') + 1) +
                " words (counted from 0, split at white space)");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("aligned.h5")));
  EXPECT_FALSE(std::filesystem::exists(dir_.file("aligned.h5.tmp")));
}

TEST_F(AlignedPrep, AlignmentLinesMoreOrFewerThanPairsAreRefusedWithBothCounts) {
  std::vector<std::string> lines;
  for (const auto& links : links_) lines.push_back(pharaoh(links));
  lines.pop_back();
  testing::write_lines(dir_.file("train.align"), lines);
  EXPECT_EQ(prep_error(options()), "train split: '" + dir_.file("train.align") +
                                       "' has 199 alignment lines but '" + dir_.file("train.src") +
                                       "' has 200 lines; expected one alignment line per " +
                                       "sentence pair");
  EXPECT_FALSE(std::filesystem::exists(dir_.file("aligned.h5")));
}

}  // namespace
}  // namespace tandem::data
