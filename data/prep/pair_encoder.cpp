#include "data/prep/pair_encoder.h"

#include <algorithm>
#include <exception>
#include <thread>

namespace tandem::data {
namespace {

// Each side gets the token its marks start it with as its first; max_len counts it.
void encode_slice(const Vocab& vocab, int64_t max_len, const LanguageMarks& marks,
                  const RawPair* pairs, size_t count, EncodedSlice& out) {
  const int32_t src_prefix = marks.source_prefix(), tgt_prefix = marks.target_code;
  for (size_t i = 0; i < count; ++i) {
    Verdict verdict = raw_verdict(pairs[i].src, pairs[i].tgt);
    if (verdict == kKept) {
      std::vector<int32_t> src = vocab.encode(pairs[i].src, Side::kSource);
      std::vector<int32_t> tgt = vocab.encode(pairs[i].tgt, Side::kTarget);
      if (src_prefix >= 0 && !src.empty()) src.insert(src.begin(), src_prefix);
      if (tgt_prefix >= 0 && !tgt.empty()) tgt.insert(tgt.begin(), tgt_prefix);
      const auto longest = static_cast<int64_t>(std::max(src.size(), tgt.size()));
      if (src.empty() || tgt.empty()) {  // e.g. only characters the normalizer removes
        verdict = kEmpty;
      } else if (longest > max_len) {
        verdict = kTooLong;
      } else {
        out.src_tokens.insert(out.src_tokens.end(), src.begin(), src.end());
        out.tgt_tokens.insert(out.tgt_tokens.end(), tgt.begin(), tgt.end());
        out.src_lengths.push_back(static_cast<int64_t>(src.size()));
        out.tgt_lengths.push_back(static_cast<int64_t>(tgt.size()));
      }
    }
    out.verdicts.push_back(verdict);
  }
}

}  // namespace

std::vector<EncodedSlice> encode_chunk(const Vocab& vocab, int64_t max_len,
                                       const LanguageMarks& marks, const RawPair* pairs,
                                       size_t count, int threads) {
  const size_t slices = std::max<size_t>(1, std::min<size_t>(threads, count));
  std::vector<EncodedSlice> encoded(slices);
  std::vector<std::exception_ptr> errors(slices);
  const auto run = [&](size_t k) {
    try {
      const size_t begin = count * k / slices;
      const size_t end = count * (k + 1) / slices;
      encode_slice(vocab, max_len, marks, pairs + begin, end - begin, encoded[k]);
    } catch (...) {
      errors[k] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  for (size_t k = 1; k < slices; ++k) workers.emplace_back(run, k);
  run(0);
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return encoded;
}

}  // namespace tandem::data
