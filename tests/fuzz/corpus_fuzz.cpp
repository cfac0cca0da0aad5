// The corpus reader on edits of a real corpus tandem-prep's code wrote (hdf5_edit.h): opening it,
// its vocabulary, its corpora's ranges, each split's lengths, the training batch plan over them,
// and every pair read by those batches. Every token id read must lie inside the vocabulary (the
// model's embedding lookup indexes with it).
#include <string>
#include <vector>

#include "data/batching/batch_plan.h"
#include "data/corpus/corpus.h"
#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "tests/fuzz/hdf5_edit.h"

namespace tandem::fuzz {

std::vector<std::string> seeds() {
  return seeds_for(base_corpus(), {"", std::string("\x03\x05\x01\x02", 4),
                                   std::string("\x00\x10\x04\x03\x00\x07", 6)});
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const std::string path = fuzz::file_to_read(fuzz::base_corpus(), "edited-corpus.h5", data, size);
  fuzz::refused_or_read([&] {
    const data::Corpus corpus(path);
    const int64_t vocab_size = corpus.vocab().size();
    for (const auto& direction : corpus.directions()) {  // inside their splits, or refused
      for (const auto& [split, range] : direction.splits) {
        if (range.first < 0 || range.count < 0 || range.end() > corpus.size(split)) {
          fuzz::fail("corpus " + direction.name + ": its " + split + " range leaves the split");
        }
      }
    }
    for (const char* split : {"train", "valid", "test"}) {
      if (!corpus.has_split(split)) continue;
      const int64_t pairs = corpus.size(split);
      const auto src = corpus.src_lengths(split);
      const auto tgt = corpus.tgt_lengths(split);
      if (static_cast<int64_t>(src.size()) != pairs || static_cast<int64_t>(tgt.size()) != pairs) {
        fuzz::fail(std::string("split ") + split + ": lengths disagree with its size");
      }
      data::BatchPlanOptions options;
      options.max_tokens = 32;
      const data::BatchPlan plan = data::make_batch_plan(corpus.padded_lengths(split), options, 0);
      int64_t seen = 0;
      for (const auto& batch : plan.batches()) {
        const auto read = corpus.read(split, batch);
        for (size_t i = 0; i < batch.size(); ++i) {
          const auto& pair = read[i];
          if (static_cast<int32_t>(pair.src.size()) != src[batch[i]] ||
              static_cast<int32_t>(pair.tgt.size()) != tgt[batch[i]]) {
            fuzz::fail("a pair's tokens disagree with its lengths");
          }
          for (const auto* side : {&pair.src, &pair.tgt}) {
            for (const int32_t id : *side) {
              if (id < 0 || id >= vocab_size) fuzz::fail("token id outside the vocabulary");
            }
          }
        }
        seen += static_cast<int64_t>(batch.size());
      }
      if (seen != pairs) fuzz::fail(std::string("the plan of ") + split + " misses pairs");
    }
  });
  return 0;
}
