// The vocabulary: a SentencePiece model with Tandem's fixed special ids
// (pad 0, unk 1, bos 2, eos 3), trained with the SentencePiece C++ trainer and stored as bytes.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "trainer/common/token_ids.h"

namespace tandem::data {

class SentencePieceModel;  // data/sentencepiece_module.h

struct VocabTrainOptions {
  int64_t vocab_size = 8000;          // pieces, specials included
  double character_coverage = 1.0;    // SentencePiece's --character_coverage
  std::string model_type = "unigram"; // unigram | bpe
  // Sentences sampled for training; 0 = all. Training needs about 25 bytes per character of the
  // sample (SentencePiece's suffix arrays): 200k sentences of ~130 characters take ~0.7 GB.
  int64_t input_sentence_size = 200000;
  uint64_t seed = 1;                  // for the sentence sample
};

class Vocab {
 public:
  // Trains a joint model on the lines of `texts` (all sides together). Deterministic for the
  // same input and options.
  static Vocab train(const std::vector<std::string>& texts, const VocabTrainOptions& options);
  // Loads a model from the bytes serialized() produced (as stored in corpus and checkpoint files).
  static Vocab from_bytes(const std::string& model_bytes);

  Vocab(Vocab&&) noexcept;
  Vocab& operator=(Vocab&&) noexcept;
  ~Vocab();

  std::string bytes() const;  // the serialized SentencePiece model proto
  int64_t size() const;
  std::vector<int32_t> encode(const std::string& text) const;  // no BOS/EOS added
  std::string decode(const std::vector<int32_t>& ids) const;   // specials are skipped
  // The text of piece `id` as SentencePiece spells it ("▁the", "<unk>", "</s>"): what other
  // engines' vocabulary files list. std::out_of_range unless 0 <= id < size().
  std::string piece(int32_t id) const;

 private:
  Vocab();
  std::unique_ptr<SentencePieceModel> sp_;
};

}  // namespace tandem::data
