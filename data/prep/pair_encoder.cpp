#include "data/prep/pair_encoder.h"

#include <algorithm>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

#include "data/prep/alignment.h"
#include "data/vocab/words.h"

namespace tandem::data {
namespace {

// One side of a pair: its tokens after the mark `prefix` (if any), and with alignments each
// token's word (-1 for the mark).
struct EncodedSide {
  std::vector<int32_t> tokens, words;
};

EncodedSide encode_side(const Vocab& vocab, const std::string& text, Side side, int32_t prefix,
                        bool aligned) {
  EncodedSide out;
  out.tokens = vocab.encode(text, side, aligned ? &out.words : nullptr);
  if (prefix >= 0 && !out.tokens.empty()) {
    out.tokens.insert(out.tokens.begin(), prefix);
    if (aligned) out.words.insert(out.words.begin(), -1);
  }
  return out;
}

// What is wrong with a pair's alignment line.
struct BadAlignment : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The word links of a pair's alignment line (none without alignments).
std::vector<WordLink> word_links_of(const RawPair& pair) {
  if (!pair.aligned) return {};
  try {
    return parse_pharaoh(pair.align, split_words(pair.src).size(), split_words(pair.tgt).size());
  } catch (const std::invalid_argument& e) {
    throw BadAlignment(e.what());
  }
}

// A kept pair's links between pieces, as many as a pair may have.
std::vector<int32_t> links_of(const std::vector<WordLink>& words, const EncodedSide& src,
                              const EncodedSide& tgt) {
  std::vector<int32_t> links = piece_links(words, src.words, tgt.words);
  if (static_cast<int64_t>(links.size()) > kMaxLinkValues) {
    throw BadAlignment("its " + std::to_string(links.size() / 2) +
                       " links between pieces are more than the " +
                       std::to_string(kMaxLinkValues / 2) + " a pair may have");
  }
  return links;
}

// One pair's verdict; a kept pair's tokens (and links) appended to `out`. Each side gets the token
// its marks start it with as its first; max_len counts it. BadAlignment for its alignment line.
Verdict encode_pair(const Vocab& vocab, int64_t max_len, const LanguageMarks& marks,
                    const RawPair& pair, EncodedSlice& out) {
  const Verdict verdict = raw_verdict(pair.src, pair.tgt);
  if (verdict != kKept) return verdict;
  const std::vector<WordLink> words = word_links_of(pair);
  const EncodedSide src =
      encode_side(vocab, pair.src, Side::kSource, marks.source_prefix(), pair.aligned);
  const EncodedSide tgt =
      encode_side(vocab, pair.tgt, Side::kTarget, marks.target_code, pair.aligned);
  if (src.tokens.empty() || tgt.tokens.empty()) return kEmpty;  // only what normalizing removes
  if (static_cast<int64_t>(std::max(src.tokens.size(), tgt.tokens.size())) > max_len) {
    return kTooLong;
  }
  const std::vector<int32_t> links = links_of(words, src, tgt);
  out.src_tokens.insert(out.src_tokens.end(), src.tokens.begin(), src.tokens.end());
  out.tgt_tokens.insert(out.tgt_tokens.end(), tgt.tokens.begin(), tgt.tokens.end());
  out.src_lengths.push_back(static_cast<int64_t>(src.tokens.size()));
  out.tgt_lengths.push_back(static_cast<int64_t>(tgt.tokens.size()));
  out.links.insert(out.links.end(), links.begin(), links.end());
  out.link_lengths.push_back(static_cast<int64_t>(links.size()));
  return kKept;
}

// A slice's pairs, up to the first whose alignment line is wrong.
void encode_slice(const Vocab& vocab, int64_t max_len, const LanguageMarks& marks,
                  const RawPair* pairs, size_t count, EncodedSlice& out) {
  for (size_t i = 0; i < count; ++i) {
    try {
      out.verdicts.push_back(encode_pair(vocab, max_len, marks, pairs[i], out));
    } catch (const BadAlignment& e) {
      out.bad_alignment = static_cast<int64_t>(i);
      out.alignment_error = e.what();
      return;
    }
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
