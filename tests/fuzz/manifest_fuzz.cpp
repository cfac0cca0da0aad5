// tandem-prep's corpora manifest (data/prep/manifest.h): YAML text, read into corpora or refused
// naming the manifest, line and key. Whatever reads has a name, both languages and a train split
// for every corpus, each split with files on both sides.
#include <string>
#include <vector>

#include "data/prep/manifest.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  return {
      "corpora:\n"
      "  - name: en-es\n    src_lang: en\n    tgt_lang: es\n"
      "    train: {src: train.en, tgt: train.es}\n    valid: {src: valid.en, tgt: valid.es}\n"
      "  - name: es-en\n    src_lang: es\n    tgt_lang: en\n"
      "    train: {src: [a.es, /b.es], tgt: [a.en, /b.en]}\n    test: {src: t.es, tgt: t.en}\n",
      "corpora: [{name: a, src_lang: x, tgt_lang: y, train: {src: s, tgt: t}}]\n"};
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const std::string path =
      fuzz::write_scratch("corpora.yaml", std::string(reinterpret_cast<const char*>(data), size));
  fuzz::refused_or_read([&] {
    for (const auto& corpus : data::read_corpora_manifest(path)) {
      bool train = false;
      for (const auto& split : corpus.splits) {
        if (split.src.empty() || split.tgt.empty()) fuzz::fail("a split without files on a side");
        train = train || split.name == "train";
      }
      if (!train) fuzz::fail("a corpus without its train split read");
    }
  });
  return 0;
}
