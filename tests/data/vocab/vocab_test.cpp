#include "data/vocab/vocab.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "tests/data/test_corpus.h"

namespace tandem::data {
namespace {

std::vector<std::string> training_lines() {
  const testing::SyntheticText text = testing::synthetic_text(200, 1);
  std::vector<std::string> lines = text.src;
  lines.insert(lines.end(), text.tgt.begin(), text.tgt.end());
  return lines;
}

TEST(Vocab, TrainingIsDeterministic) {
  const auto lines = training_lines();
  EXPECT_EQ(Vocab::train(lines, testing::small_vocab()).bytes(),
            Vocab::train(lines, testing::small_vocab()).bytes());
}

TEST(Vocab, DecodeOfEncodeRestoresTrainingSentences) {
  const auto lines = training_lines();
  const Vocab vocab = Vocab::train(lines, testing::small_vocab());
  EXPECT_GT(vocab.size(), 4);
  EXPECT_LE(vocab.size(), testing::small_vocab().vocab_size);
  for (const std::string& line : lines) {
    const std::vector<int32_t> ids = vocab.encode(line, Side::kSource);
    for (const int32_t id : ids) {
      EXPECT_GT(id, kEosId) << "special id inside '" << line << "'";  // known pieces only
      EXPECT_LT(id, vocab.size());
    }
    EXPECT_EQ(vocab.decode(ids, Side::kTarget), line);
  }
}

TEST(Vocab, DecodeSkipsSpecialIds) {
  const Vocab vocab = Vocab::train(training_lines(), testing::small_vocab());
  std::vector<int32_t> ids = vocab.encode("der hund sieht die katze", Side::kSource);
  std::vector<int32_t> framed = {kBosId};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), {kEosId, kPadId, kPadId});
  EXPECT_EQ(vocab.decode(framed, Side::kTarget), "der hund sieht die katze");
}

TEST(Vocab, BytesRoundTrip) {
  const Vocab trained = Vocab::train(training_lines(), testing::small_vocab());
  const Vocab loaded = Vocab::from_bytes(trained.bytes());
  EXPECT_EQ(loaded.bytes(), trained.bytes());
  EXPECT_EQ(loaded.size(), trained.size());
  EXPECT_EQ(loaded.encode("das rote haus", Side::kSource),
            trained.encode("das rote haus", Side::kSource));
  EXPECT_FALSE(loaded.paired());
}

TEST(Vocab, GarbageBytesAreRejected) {
  EXPECT_THROW(Vocab::from_bytes("not a model"), std::invalid_argument);
}

// A protobuf length-delimited field: its key, its length (varint) and its bytes.
std::string field(int number, const std::string& bytes) {
  std::string out(1, static_cast<char>(number << 3 | 2));
  for (uint64_t n = bytes.size();; n >>= 7) {
    out.push_back(static_cast<char>((n & 0x7f) | (n >= 0x80 ? 0x80 : 0)));
    if (n < 0x80) break;
  }
  return out + bytes;
}

// A normalization table: trie size, a trie of 256 units (all 0 but `units`), the strings.
std::string table(const std::map<int, uint32_t>& units, const std::string& strings,
                  uint32_t trie_size = 1024) {
  std::string out(4 + 1024, '\0');
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(trie_size >> (8 * i));
  for (const auto& [index, unit] : units) {
    for (int i = 0; i < 4; ++i) out[4 + 4 * index + i] = static_cast<char>(unit >> (8 * i));
  }
  return out + strings;
}

// A damaged or crafted normalization table inside the model (found by tests/fuzz/vocab_fuzz.cpp:
// SentencePiece read outside it, a SEGV). Appended as a second normalizer_spec (field 3, its
// precompiled_charsmap field 2), which protobuf merges into the first: the last table wins.
TEST(Vocab, ANormalizationTableThatLeadsOutsideItselfIsRefusedBeforeSentencePieceReadsIt) {
  const std::string model = Vocab::train(training_lines(), testing::small_vocab()).bytes();
  const auto with_table = [&](const std::string& t) { return model + field(3, field(2, t)); };
  const auto refusal = [](const std::string& bytes) -> std::string {
    try {
      Vocab::from_bytes(bytes);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "";
  };
  // A table that leads nowhere but stays inside itself reads, and normalizes nothing.
  const Vocab harmless = Vocab::from_bytes(with_table(table({}, std::string(1, '\0'))));
  EXPECT_EQ(harmless.decode(harmless.encode("das rote haus", Side::kSource), Side::kTarget),
            "das rote haus");

  EXPECT_NE(refusal(with_table(table({}, std::string(1, '\0'), 5000))).find("trie size 5000"),
            std::string::npos);
  // The root's children start at unit 1000 of 256.
  EXPECT_NE(refusal(with_table(table({{0, 1000u << 10}}, std::string(1, '\0'))))
                .find("normalizer's table: its trie leads to unit 1023 of 256"),
            std::string::npos);
  // 'a' (97) is a leaf whose value, 353, is past the 2 bytes of strings.
  EXPECT_NE(refusal(with_table(table({{97, 97u | 1u << 8}}, std::string("x\0", 2))))
                .find("maps to string 353 of 2 bytes"),
            std::string::npos);
  EXPECT_NE(refusal(with_table(table({}, "no NUL"))).find("do not end in NUL"), std::string::npos);
  // The denormalizer's table (field 5) is checked the same way.
  EXPECT_NE(refusal(model + field(5, field(2, table({{0, 1000u << 10}}, std::string(1, '\0')))))
                .find("denormalizer's table"),
            std::string::npos);
}

// A paired vocabulary as MarianMT's: a source model trained on one side's text, a target model on
// the other's, and one table of every piece of both (sorted, so that no id is either model's own),
// with a language token, and without the piece "▁katze" (which must come out as unk).
class PairedVocab : public ::testing::Test {
 protected:
  PairedVocab() {
    const testing::SyntheticText text = testing::synthetic_text(200, 1);
    src_lines_ = text.src;
    tgt_lines_ = text.tgt;
    auto options = testing::small_vocab();
    options.vocab_size = 40;
    source_ = std::make_unique<Vocab>(Vocab::train(src_lines_, options));
    target_ = std::make_unique<Vocab>(Vocab::train(tgt_lines_, options));
    std::set<std::string> rest = {">>es<<"};
    for (const Vocab* side : {source_.get(), target_.get()}) {
      for (int32_t id = kEosId + 1; id < side->size(); ++id) rest.insert(side->piece(id));
    }
    EXPECT_EQ(rest.erase("\u2581katze"), 1u) << "the test text should have the piece";
    pieces_ = {"<pad>", "<unk>", "<s>", "</s>"};
    pieces_.insert(pieces_.end(), rest.begin(), rest.end());
    for (size_t id = 0; id < pieces_.size(); ++id) id_of_[pieces_[id]] = static_cast<int32_t>(id);
  }

  Vocab paired() const { return Vocab::from_pair(source_->bytes(), target_->bytes(), pieces_); }
  // What a side's own model cuts `text` into, looked up in the table by hand.
  std::vector<int32_t> by_hand(const Vocab& side, const std::string& text) const {
    std::vector<int32_t> ids;
    for (const int32_t id : side.encode(text, Side::kSource)) {
      const auto found = id_of_.find(side.piece(id));
      ids.push_back(found == id_of_.end() ? kUnkId : found->second);
    }
    return ids;
  }

  std::vector<std::string> src_lines_, tgt_lines_, pieces_;
  std::map<std::string, int32_t> id_of_;
  std::unique_ptr<Vocab> source_, target_;
};

TEST_F(PairedVocab, EachSideIsItsModelsPiecesLookedUpInTheTable) {
  const Vocab vocab = paired();
  EXPECT_TRUE(vocab.paired());
  EXPECT_EQ(vocab.size(), static_cast<int64_t>(pieces_.size()));
  int unks = 0;
  for (size_t i = 0; i < src_lines_.size(); ++i) {
    const auto src = vocab.encode(src_lines_[i], Side::kSource);
    const auto tgt = vocab.encode(tgt_lines_[i], Side::kTarget);
    EXPECT_EQ(src, by_hand(*source_, src_lines_[i])) << src_lines_[i];
    EXPECT_EQ(tgt, by_hand(*target_, tgt_lines_[i])) << tgt_lines_[i];
    unks += static_cast<int>(std::count(tgt.begin(), tgt.end(), kUnkId) +
                             std::count(src.begin(), src.end(), kUnkId));
  }
  EXPECT_GT(unks, 0) << "no line had the piece left out of the table";
  // The sides differ: a target line through the source model is cut as the source model cuts it.
  EXPECT_EQ(vocab.encode(tgt_lines_[0], Side::kSource), by_hand(*source_, tgt_lines_[0]));
  EXPECT_NE(vocab.encode(tgt_lines_[0], Side::kSource), vocab.encode(tgt_lines_[0], Side::kTarget));
}

TEST_F(PairedVocab, ALeadingLanguageTokenIsAPieceOfItsOwn) {
  const Vocab vocab = paired();
  const std::string line = src_lines_[3];
  auto expected = by_hand(*source_, line);
  expected.insert(expected.begin(), id_of_.at(">>es<<"));
  EXPECT_EQ(vocab.encode(">>es<< " + line, Side::kSource), expected);
  // One the table lacks is unk; one further in is dropped, as MarianTokenizer drops it.
  EXPECT_EQ(vocab.encode(">>xx<< " + line, Side::kSource)[0], kUnkId);
  EXPECT_EQ(vocab.encode(line + " >>es<<", Side::kSource), by_hand(*source_, line));
  // Not a language token: nothing between the brackets.
  EXPECT_EQ(vocab.encode(">><<", Side::kSource), by_hand(*source_, ">><<"));
}

TEST_F(PairedVocab, DecodeIsTheTargetModelsTextWithoutSpecials) {
  const Vocab vocab = paired();
  for (const std::string& line : tgt_lines_) {
    if (line.find("katze") != std::string::npos) continue;  // unk is dropped, not restored
    auto ids = vocab.encode(line, Side::kTarget);
    ids.insert(ids.begin(), kBosId);
    ids.insert(ids.end(), {kEosId, kPadId});
    EXPECT_EQ(vocab.decode(ids, Side::kTarget), line);
  }
  EXPECT_EQ(vocab.decode({kBosId, kUnkId, kEosId}, Side::kTarget), "");
  EXPECT_EQ(vocab.piece(id_of_.at(">>es<<")), ">>es<<");
  EXPECT_EQ(vocab.piece(kBosId), "<s>");
}

TEST_F(PairedVocab, BytesRoundTripAndEachSidesModelComesBack) {
  const Vocab vocab = paired();
  const Vocab loaded = Vocab::from_bytes(vocab.bytes());
  EXPECT_TRUE(loaded.paired());
  EXPECT_EQ(loaded.bytes(), vocab.bytes());
  for (size_t i = 0; i < 20; ++i) {
    EXPECT_EQ(loaded.encode(src_lines_[i], Side::kSource),
              vocab.encode(src_lines_[i], Side::kSource));
    EXPECT_EQ(loaded.encode(tgt_lines_[i], Side::kTarget),
              vocab.encode(tgt_lines_[i], Side::kTarget));
  }
  EXPECT_EQ(loaded.sentencepiece_bytes(Side::kSource), source_->bytes());
  EXPECT_EQ(loaded.sentencepiece_bytes(Side::kTarget), target_->bytes());
  EXPECT_EQ(source_->sentencepiece_bytes(Side::kTarget), source_->bytes());  // joint: one model
}

// Every cut of the bytes, and a byte more, is refused with an error rather than read past its end.
TEST_F(PairedVocab, TruncatedOrPaddedBytesAreRefused) {
  const std::string bytes = paired().bytes();
  for (size_t size = 1; size < bytes.size(); size += size < 64 ? 1 : 97) {
    EXPECT_THROW(Vocab::from_bytes(bytes.substr(0, size)), std::invalid_argument) << size;
  }
  EXPECT_THROW(Vocab::from_bytes(bytes + "x"), std::invalid_argument);
}

TEST_F(PairedVocab, BadTablesAreRefusedNamingTheProblem) {
  auto twice = pieces_;
  twice.push_back(pieces_[5]);
  try {
    Vocab::from_pair(source_->bytes(), target_->bytes(), twice);
    FAIL() << "a piece twice was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'" + pieces_[5] + "' has ids 5 and"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(Vocab::from_pair(source_->bytes(), target_->bytes(), {"<pad>", "<unk>"}),
               std::invalid_argument);
  try {
    Vocab::from_pair(source_->bytes(), "junk", pieces_);
    FAIL() << "a junk target model was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("the target model"), std::string::npos) << e.what();
  }
}

// Language codes as NLLB-200's and M2M-100's (ids of the table named by their language) and
// another special: kept through the bytes, left out of decoded text, found by language, and the
// nearest languages named for one the model lacks. ">>es<<" is an ordinary piece then.
TEST_F(PairedVocab, LanguageCodesAndSpecialsRoundTripAndAreLeftOutOfText) {
  auto pieces = pieces_;
  pieces.insert(pieces.end(), {"eng_Latn", "spa_Latn", "spa_Latm", "<mask>"});
  const auto first = static_cast<int32_t>(pieces_.size());
  PairExtras extras;
  extras.codes = {{"spa_Latn", first + 1}, {"eng_Latn", first}, {"spa_Latm", first + 2}};
  extras.specials = {first + 3};
  const Vocab vocab = Vocab::from_pair(source_->bytes(), target_->bytes(), pieces, extras);
  EXPECT_TRUE(vocab.coded());
  EXPECT_FALSE(paired().coded());
  ASSERT_EQ(vocab.language_codes().size(), 3u);
  EXPECT_EQ(vocab.language_codes()[0].language, "eng_Latn");  // in id order
  EXPECT_EQ(vocab.code_id("spa_Latn"), first + 1);
  EXPECT_EQ(vocab.code_id("fra_Latn"), -1);
  EXPECT_EQ(vocab.nearest_languages("SPA_latn", 2), "spa_Latn, spa_Latm");

  const Vocab loaded = Vocab::from_bytes(vocab.bytes());
  EXPECT_EQ(loaded.bytes(), vocab.bytes());
  EXPECT_EQ(loaded.code_id("spa_Latm"), first + 2);
  const std::string line = tgt_lines_[1];
  auto ids = loaded.encode(line, Side::kTarget);
  EXPECT_EQ(ids, vocab.encode(line, Side::kTarget));
  ids.insert(ids.begin(), first + 1);
  ids.insert(ids.begin() + 2, first + 3);
  EXPECT_EQ(loaded.decode(ids, Side::kTarget), vocab.decode(ids, Side::kTarget));
  EXPECT_EQ(loaded.decode({first + 1, first + 3}, Side::kTarget), "");
  // A coded model takes no >>xx<< tags: the text is SentencePiece's alone.
  EXPECT_EQ(vocab.encode(">>es<< " + line, Side::kSource), by_hand(*source_, ">>es<< " + line));
  // Without extras the bytes stay version 1, as before codes existed.
  EXPECT_EQ(paired().bytes().compare(0, 27, "tandem paired vocabulary 1\n"), 0);
  EXPECT_EQ(vocab.bytes().compare(0, 27, "tandem paired vocabulary 2\n"), 0);
  const std::string bytes = vocab.bytes();
  for (size_t size = bytes.size() - 60; size < bytes.size(); ++size) {
    EXPECT_THROW(Vocab::from_bytes(bytes.substr(0, size)), std::invalid_argument) << size;
  }

  auto refused = [&](PairExtras bad, const std::string& expected) {
    try {
      Vocab::from_pair(source_->bytes(), target_->bytes(), pieces, std::move(bad));
      ADD_FAILURE() << "accepted: " << expected;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  };
  refused({{{"eng_Latn", first}, {"eng_Latn", first + 1}}, {}}, "'eng_Latn' is empty or given");
  refused({{{"eng_Latn", first}}, {first}}, "named twice");
  refused({{{"eng_Latn", kEosId}}, {}}, "outside");
  refused({{{"eng_Latn", static_cast<int32_t>(pieces.size())}}, {}}, "outside");
}

}  // namespace
}  // namespace tandem::data
