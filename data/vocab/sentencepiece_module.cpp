// libtandem_sentencepiece.so: SentencePiece behind data/vocab/sentencepiece_module.h (see there
// why).
#include "data/vocab/sentencepiece_module.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

namespace tandem::data {
namespace {

// Feeds in-memory sentences to the trainer, so no temporary file is needed.
class VectorIterator : public sentencepiece::SentenceIterator {
 public:
  explicit VectorIterator(const std::vector<std::string>& texts) : texts_(texts) {}
  bool done() const override { return index_ >= texts_.size(); }
  void Next() override { ++index_; }
  const std::string& value() const override { return texts_[index_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& texts_;
  size_t index_ = 0;
};

std::string message(const sentencepiece::util::Status& status) {
  return status.ok() ? std::string() : status.ToString();
}

class Model final : public SentencePieceModel {
 public:
  sentencepiece::SentencePieceProcessor processor;

  std::string serialized() const override { return processor.serialized_model_proto(); }
  int64_t size() const override { return processor.GetPieceSize(); }
  std::string encode(const std::string& text, std::vector<int>* ids) const override {
    return message(processor.Encode(text, ids));
  }
  std::string decode(const std::vector<int>& ids, std::string* text) const override {
    return message(processor.Decode(ids, text));
  }
  std::string piece(int id) const override { return processor.IdToPiece(id); }
  std::string encode_pieces(const std::string& text,
                            std::vector<std::string>* pieces) const override {
    return message(processor.Encode(text, pieces));
  }
  std::string decode_pieces(const std::vector<std::string>& pieces,
                            std::string* text) const override {
    return message(processor.Decode(pieces, text));
  }
  std::string encode_spans(const std::string& text, PieceSpans* spans) const override {
    sentencepiece::ImmutableSentencePieceText encoded;
    const std::string error = message(processor.Encode(text, encoded.mutable_proto()));
    for (const auto& piece : encoded.pieces()) {
      spans->ids.push_back(static_cast<int>(piece.id()));
      spans->pieces.push_back(piece.piece());
      spans->begins.push_back(piece.begin());
      spans->ends.push_back(piece.end());
    }
    return error;
  }
};

class Library final : public SentencePieceLibrary {
 public:
  std::string train(const std::vector<std::string>& sentences,
                    const std::unordered_map<std::string, std::string>& args, uint32_t seed,
                    std::string* model) const override {
    // The trainer samples and shuffles sentences with this process-wide generator.
    sentencepiece::SetRandomGeneratorSeed(seed);
    VectorIterator iterator(sentences);
    return message(sentencepiece::SentencePieceTrainer::Train(args, &iterator, model));
  }
  std::string load(const std::string& model_bytes,
                   std::unique_ptr<SentencePieceModel>* model) const override {
    auto loaded = std::make_unique<Model>();
    std::string error = message(loaded->processor.LoadFromSerializedProto(model_bytes));
    if (error.empty()) *model = std::move(loaded);
    return error;
  }
};

}  // namespace
}  // namespace tandem::data

extern "C" const tandem::data::SentencePieceLibrary* tandem_sentencepiece_library() {
  static const tandem::data::Library library{};
  return &library;
}
