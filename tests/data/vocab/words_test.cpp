// Words as aligners count them, and each piece's word: split_words against hand-made lines (Unicode
// spaces included), words_of_pieces against hand-made spans, word links and their Pharaoh text
// against hand-made attention, Vocab::decode's words against Vocab::encode's, and Vocab::encode's
// words against the pieces' own texts, joint and with a language tag.
#include "data/vocab/words.h"

#include <gtest/gtest.h>

#include <set>

#include "data/vocab/vocab.h"
#include "tests/data/test_corpus.h"
#include "trainer/common/token_ids.h"

namespace tandem::data {
namespace {

std::vector<std::string> words_of(const std::string& text) {
  std::vector<std::string> words;
  for (const ByteRange& word : split_words(text)) {
    words.push_back(text.substr(word.begin, word.end - word.begin));
  }
  return words;
}

TEST(Words, SplitAtEveryWhiteSpacePythonSplitsAt) {
  EXPECT_EQ(words_of("  the  red\thouse \n"), (std::vector<std::string>{"the", "red", "house"}));
  // U+00A0, U+3000, U+2009 and U+205F split; U+200B (zero width space) and "é" do not.
  EXPECT_EQ(words_of("a\xC2\xA0"
                     "b\xE3\x80\x80"
                     "c\xE2\x80\x89"
                     "d\xE2\x81\x9F"
                     "e\xE2\x80\x8B"
                     "f\xC3\xA9"),
            (std::vector<std::string>{"a", "b", "c", "d",
                                      "e\xE2\x80\x8B"
                                      "f\xC3\xA9"}));
  EXPECT_TRUE(split_words(" \t ").empty());
  EXPECT_TRUE(split_words("").empty());
}

TEST(Words, APieceTakesTheWordOfItsFirstByteAndALoneSpaceTheNextPiecesWord) {
  const std::string text = "ab cd e";  // words [0,2) [3,5) [6,7)
  const std::vector<ByteRange> words = split_words(text);
  // "▁ab" (no byte for the added space), "▁" (the space before cd), "c", "d", "▁e"
  const std::vector<uint32_t> begins = {0, 2, 3, 4, 5};
  const std::vector<uint32_t> ends = {2, 3, 4, 5, 7};
  EXPECT_EQ(words_of_pieces(text, words, begins, ends), (std::vector<int32_t>{0, 1, 1, 1, 2}));
  // A trailing lone space joins the word before it; no words at all gives -1.
  EXPECT_EQ(words_of_pieces(text, words, {0, 6, 7}, {5, 7, 7}), (std::vector<int32_t>{0, 2, 2}));
  EXPECT_EQ(words_of_pieces("  ", split_words("  "), {0}, {2}), (std::vector<int32_t>{-1}));
}

// The pieces of each word, their "▁" taken out, spell the word (plain ASCII: nothing normalized).
void expect_pieces_spell_their_words(const Vocab& vocab, const std::string& line, Side side,
                                     size_t skip) {
  std::vector<int32_t> words;
  const std::vector<int32_t> ids = vocab.encode(line, side, &words);
  EXPECT_EQ(ids, vocab.encode(line, side)) << line;
  ASSERT_EQ(words.size(), ids.size());
  const std::vector<std::string> expected = words_of(line);
  std::vector<std::string> spelled(expected.size());
  for (size_t k = skip; k < ids.size(); ++k) {
    ASSERT_GE(words[k], 0) << line;
    ASSERT_LT(words[k], static_cast<int32_t>(expected.size())) << line;
    ASSERT_TRUE(k == 0 || words[k] >= words[k - 1]) << line;  // in order
    std::string piece = vocab.piece(ids[k]);
    if (piece.rfind("\xE2\x96\x81", 0) == 0) piece.erase(0, 3);
    spelled[words[k]] += piece;
  }
  for (size_t w = skip; w < expected.size(); ++w) EXPECT_EQ(spelled[w], expected[w]) << line;
}

TEST(Words, EachPieceOfAnEncodedLineBelongsToTheWordItSpells) {
  const testing::SyntheticText text = testing::synthetic_text(200, 1);
  std::vector<std::string> lines = text.src;
  lines.insert(lines.end(), text.tgt.begin(), text.tgt.end());
  const Vocab vocab = Vocab::train(lines, testing::small_vocab());
  for (size_t i = 0; i < 20; ++i)
    expect_pieces_spell_their_words(vocab, lines[i], Side::kSource, 0);
  expect_pieces_spell_their_words(vocab, "  der   hund  ", Side::kSource, 0);
}

TEST(Words, ALeadingLanguageTagIsTheFirstWord) {
  const testing::SyntheticText text = testing::synthetic_text(200, 1);
  VocabTrainOptions options = testing::small_vocab();
  options.user_symbols = {">>es<<"};
  const Vocab vocab = Vocab::train(text.src, options);
  std::vector<int32_t> words;
  const std::vector<int32_t> ids = vocab.encode(">>es<< " + text.src[0], Side::kSource, &words);
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], vocab.tag_id(">>es<<"));
  EXPECT_EQ(words[0], 0);
  EXPECT_EQ(words[1], 1);
  expect_pieces_spell_their_words(vocab, ">>es<< " + text.src[0], Side::kSource, 1);
}

// A paired vocabulary (a SentencePiece model a side, one id table, as an imported MarianMT model
// has): each side's pieces spell their words, and a leading ">>es<<" tag is word 0 and one id.
TEST(Words, APairedVocabularysPiecesSpellTheirWordsOnEachSide) {
  const testing::SyntheticText text = testing::synthetic_text(100, 3);
  const Vocab paired = testing::paired_vocab(text.src, text.tgt, {">>es<<"});
  for (size_t i = 0; i < 10; ++i) {
    expect_pieces_spell_their_words(paired, text.src[i], Side::kSource, 0);
    expect_pieces_spell_their_words(paired, text.tgt[i], Side::kTarget, 0);
  }
  std::vector<int32_t> words;
  const std::vector<int32_t> ids = paired.encode(">>es<< " + text.src[0], Side::kSource, &words);
  EXPECT_EQ(paired.piece(ids[0]), ">>es<<");
  EXPECT_EQ(words[0], 0);
  expect_pieces_spell_their_words(paired, ">>es<< " + text.src[0], Side::kSource, 1);
}

// Decoding ids says the word each falls in: for a line that decodes back to itself, the words its
// encoding gave each piece; specials and tags fall in none.
void expect_decoded_words_are_the_encoded_ones(const Vocab& vocab, const std::string& line,
                                               Side side) {
  std::vector<int32_t> encoded_words, decoded_words;
  std::vector<int32_t> ids = vocab.encode(line, side, &encoded_words);
  ASSERT_EQ(vocab.decode(ids, side), line);
  EXPECT_EQ(vocab.decode(ids, side, &decoded_words), line);
  EXPECT_EQ(decoded_words, encoded_words) << line;
  ids.push_back(static_cast<int32_t>(kEosId));
  vocab.decode(ids, side, &decoded_words);
  EXPECT_EQ(decoded_words.back(), -1) << "EOS";
}

TEST(Words, DecodingSaysTheWordEachIdFallsIn) {
  const testing::SyntheticText text = testing::synthetic_text(200, 1);
  const Vocab joint = Vocab::train(text.src, testing::small_vocab());
  const Vocab paired = testing::paired_vocab(text.src, text.tgt);
  for (size_t i = 0; i < 10; ++i) {
    expect_decoded_words_are_the_encoded_ones(joint, text.src[i], Side::kSource);
    expect_decoded_words_are_the_encoded_ones(paired, text.tgt[i], Side::kTarget);
  }
}

TEST(WordLinks, LinkEachTargetPiecesWordToItsAttendedPiecesWordOnceInOrder) {
  // Source pieces: a tag (no word), word 0 in two pieces, word 1, EOS (no word).
  const std::vector<int32_t> source_words = {-1, 0, 0, 1, -1};
  // Target pieces: word 0, word 1 in two pieces, a piece of no word.
  const std::vector<int32_t> target_words = {0, 1, 1, -1};
  EXPECT_EQ(word_links(source_words, target_words, {3, 1, 2, 1}),
            (std::vector<WordLink>{{0, 1}, {1, 0}}));
  EXPECT_EQ(word_links(source_words, target_words, {0, 4, 3, 3}), (std::vector<WordLink>{{1, 1}}))
      << "to the tag and to EOS: no link";
  EXPECT_EQ(word_links(source_words, target_words, {7, -1, 2}), (std::vector<WordLink>{{0, 1}}))
      << "positions outside the source, and pieces without an attended position";
  EXPECT_EQ(pharaoh({{0, 1}, {1, 0}, {12, 3}}), "0-1 1-0 12-3");
  EXPECT_EQ(pharaoh({}), "");
}

TEST(WordAttention, AWordsRowIsTheMeanOverItsPiecesOfEachSourceWordsSummedAttention) {
  // Source pieces: a tag (no word), word 0 in two pieces, word 1, EOS (no word).
  const std::vector<int32_t> source_words = {-1, 0, 0, 1, -1};
  // Target pieces: word 0, word 1 in two pieces, a piece of no word.
  const std::vector<int32_t> target_words = {0, 1, 1, -1};
  const int64_t positions = 5;
  const std::vector<float> rows = {0.1f, 0.2f, 0.3f, 0.3f, 0.1f,   //
                                   0.0f, 0.5f, 0.0f, 0.4f, 0.1f,   //
                                   0.2f, 0.1f, 0.1f, 0.2f, 0.4f,   //
                                   0.9f, 0.0f, 0.0f, 0.0f, 0.1f};
  const WordAttention attention = word_attention(source_words, target_words, rows, positions);
  ASSERT_EQ(attention.source_words, 2);
  ASSERT_EQ(attention.target_words, 2);
  EXPECT_FLOAT_EQ(attention.at(0, 0), 0.2f + 0.3f);
  EXPECT_FLOAT_EQ(attention.at(0, 1), 0.3f);
  EXPECT_FLOAT_EQ(attention.at(1, 0), ((0.5f + 0.0f) + (0.1f + 0.1f)) / 2);
  EXPECT_FLOAT_EQ(attention.at(1, 1), (0.4f + 0.2f) / 2);
  // A row cut short is no row: the last piece's word keeps the first piece's attention alone.
  const std::vector<float> cut(rows.begin(), rows.begin() + 2 * positions + 3);
  EXPECT_FLOAT_EQ(word_attention(source_words, target_words, cut, positions).at(1, 1), 0.4f);

  const WordAttention hard = links_as_attention({{0, 1}, {1, 0}, {5, 0}}, 2, 2);
  EXPECT_EQ(hard.weights, (std::vector<float>{0, 1, 1, 0})) << "links outside are ignored";
}

}  // namespace
}  // namespace tandem::data
