// The vocabulary's bytes, as corpus and checkpoint files store them in /vocab: either kind (a joint
// SentencePiece model, a paired one). What reads must tokenize text, give every id's piece, and
// write back the bytes it read from.
#include <string>
#include <vector>

#include "data/vocab/vocab.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  const data::Vocab& joint = base_vocab();
  const std::string model = joint.sentencepiece_bytes(data::Side::kSource);
  std::vector<std::string> pieces;
  for (int32_t id = 0; id < joint.size(); ++id) pieces.push_back(joint.piece(id));
  pieces.push_back(">>fra<<");
  return {joint.bytes(), data::Vocab::from_pair(model, model, pieces).bytes()};
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  fuzz::refused_or_read([&] {
    const data::Vocab vocab = data::Vocab::from_bytes(bytes);
    const int64_t n = vocab.size();
    if (n < 4) fuzz::fail("a vocabulary of fewer than the four specials read");
    for (int32_t id = 0; id < n && id < 4096; ++id) vocab.piece(id);
    for (const auto side : {data::Side::kSource, data::Side::kTarget}) {
      for (const char* text :
           {"red green blue", ">>fra<< the house", "", "\xff\xfe broken utf-8"}) {
        const auto ids = vocab.encode(text, side);
        for (const int32_t id : ids) {
          if (id < 0 || id >= n) fuzz::fail("encode gave an id outside the vocabulary");
        }
        vocab.decode(ids, side);
      }
    }
    if (data::Vocab::from_bytes(vocab.bytes()).bytes() != vocab.bytes()) {
      fuzz::fail("the bytes a vocabulary writes do not read back as the same");
    }
  });
  return 0;
}
