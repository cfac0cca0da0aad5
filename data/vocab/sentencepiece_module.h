// The narrow interface through which Tandem uses SentencePiece, loaded as a module of its own so
// that its protobuf runtime cannot clash with LibTorch's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace tandem::data {

// The narrow interface through which Tandem uses SentencePiece. SentencePiece embeds and exports
// its own protobuf runtime, which clashes with the libprotobuf LibTorch loads (a crash at start-up
// when both are linked), so it lives in the module libtandem_sentencepiece.so that vocab.cpp opens
// with RTLD_LOCAL | RTLD_DEEPBIND: its symbols neither leak into nor resolve from the process.

// A text's pieces, each with its id, its text and the bytes of the input it comes from: piece k
// from byte begins[k] to ends[k] (none for a piece that stands only for a space the normalizer
// added).
struct PieceSpans {
  std::vector<int> ids;
  std::vector<std::string> pieces;
  std::vector<uint32_t> begins, ends;
};

// One loaded SentencePiece model. Methods returning std::string return "" on success and
// SentencePiece's message otherwise (no exceptions cross the module boundary).
class SentencePieceModel {
 public:
  virtual ~SentencePieceModel() = default;
  virtual std::string serialized() const = 0;
  virtual int64_t size() const = 0;
  virtual std::string encode(const std::string& text, std::vector<int>* ids) const = 0;
  virtual std::string decode(const std::vector<int>& ids, std::string* text) const = 0;
  virtual std::string piece(int id) const = 0;  // the piece's text ("▁the", "</s>"); id < size()
  // The pieces' texts rather than their ids: for a vocabulary whose ids are another table's.
  virtual std::string encode_pieces(const std::string& text,
                                    std::vector<std::string>* pieces) const = 0;
  virtual std::string decode_pieces(const std::vector<std::string>& pieces,
                                    std::string* text) const = 0;
  // encode() and encode_pieces() at once, with the bytes of `text` each piece comes from.
  virtual std::string encode_spans(const std::string& text, PieceSpans* spans) const = 0;
};

class SentencePieceLibrary {
 public:
  // Trains on `sentences` with trainer flags `args`; the model proto goes to `model`.
  virtual std::string train(const std::vector<std::string>& sentences,
                            const std::unordered_map<std::string, std::string>& args, uint32_t seed,
                            std::string* model) const = 0;
  virtual std::string load(const std::string& model_bytes,
                           std::unique_ptr<SentencePieceModel>* model) const = 0;

 protected:
  ~SentencePieceLibrary() = default;  // the module owns its single instance
};

}  // namespace tandem::data

// The module's one exported entry point (looked up with dlsym).
extern "C" const tandem::data::SentencePieceLibrary* tandem_sentencepiece_library();
