#include "data/vocab.h"

#include <gtest/gtest.h>

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
    const std::vector<int32_t> ids = vocab.encode(line);
    for (const int32_t id : ids) {
      EXPECT_GT(id, kEosId) << "special id inside '" << line << "'";  // known pieces only
      EXPECT_LT(id, vocab.size());
    }
    EXPECT_EQ(vocab.decode(ids), line);
  }
}

TEST(Vocab, DecodeSkipsSpecialIds) {
  const Vocab vocab = Vocab::train(training_lines(), testing::small_vocab());
  std::vector<int32_t> ids = vocab.encode("der hund sieht die katze");
  std::vector<int32_t> framed = {kBosId};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), {kEosId, kPadId, kPadId});
  EXPECT_EQ(vocab.decode(framed), "der hund sieht die katze");
}

TEST(Vocab, BytesRoundTrip) {
  const Vocab trained = Vocab::train(training_lines(), testing::small_vocab());
  const Vocab loaded = Vocab::from_bytes(trained.bytes());
  EXPECT_EQ(loaded.bytes(), trained.bytes());
  EXPECT_EQ(loaded.size(), trained.size());
  EXPECT_EQ(loaded.encode("das rote haus"), trained.encode("das rote haus"));
}

TEST(Vocab, GarbageBytesAreRejected) {
  EXPECT_THROW(Vocab::from_bytes("not a model"), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::data
