#include "data/vocab/words.h"

#include <algorithm>

namespace tandem::data {
namespace {

// The length of the white-space character at `at`, or 0 when none starts there.
size_t space_at(const std::string& text, size_t at) {
  const auto byte = [&](size_t k) {
    return at + k < text.size() ? static_cast<unsigned char>(text[at + k]) : 0u;
  };
  const unsigned c0 = byte(0);
  if (c0 == ' ' || (c0 >= '\t' && c0 <= '\r') || (c0 >= 0x1C && c0 <= 0x1F)) return 1;
  const unsigned c1 = byte(1), c2 = byte(2);
  if (c0 == 0xC2 && (c1 == 0x85 || c1 == 0xA0)) return 2;  // U+0085, U+00A0
  if (c0 == 0xE1 && c1 == 0x9A && c2 == 0x80) return 3;    // U+1680
  if (c0 == 0xE3 && c1 == 0x80 && c2 == 0x80) return 3;    // U+3000
  if (c0 != 0xE2) return 0;
  if (c1 == 0x80 && (c2 <= 0x8A || c2 == 0xA8 || c2 == 0xA9 || c2 == 0xAF)) {
    return 3;  // U+2000..U+200A, U+2028, U+2029, U+202F
  }
  return c1 == 0x81 && c2 == 0x9F ? 3 : 0;  // U+205F
}

}  // namespace

std::vector<ByteRange> split_words(const std::string& text) {
  std::vector<ByteRange> words;
  size_t at = 0;
  while (at < text.size()) {
    if (const size_t space = space_at(text, at); space > 0) {
      at += space;
      continue;
    }
    ByteRange word{at, at};
    while (at < text.size() && space_at(text, at) == 0) ++at;
    word.end = at;
    words.push_back(word);
  }
  return words;
}

std::vector<int32_t> words_of_pieces(const std::string& text, const std::vector<ByteRange>& words,
                                     const std::vector<uint32_t>& begins,
                                     const std::vector<uint32_t>& ends) {
  std::vector<int32_t> found(begins.size(), -1);
  for (size_t k = 0; k < begins.size(); ++k) {
    size_t at = begins[k];
    const size_t end = std::min<size_t>(ends[k], text.size());
    while (at < end && space_at(text, at) > 0) at += space_at(text, at);
    if (at >= end) continue;
    // The last word starting at or before `at`; the piece's byte lies in it.
    const auto after =
        std::upper_bound(words.begin(), words.end(), at,
                         [](size_t byte, const ByteRange& w) { return byte < w.begin; });
    if (after != words.begin()) found[k] = static_cast<int32_t>(after - words.begin() - 1);
  }
  for (size_t k = found.size(); k-- > 0;) {  // a lone "▁" opens the next piece's word
    if (found[k] < 0 && k + 1 < found.size()) found[k] = found[k + 1];
  }
  // ... or, last in the line, belongs to the one before.
  for (size_t k = 1; k < found.size(); ++k) {
    if (found[k] < 0) found[k] = found[k - 1];
  }
  return found;
}

std::vector<WordLink> word_links(const std::vector<int32_t>& source_words,
                                 const std::vector<int32_t>& target_words,
                                 const std::vector<int32_t>& attended) {
  std::vector<WordLink> links;
  for (size_t j = 0; j < target_words.size() && j < attended.size(); ++j) {
    const int32_t position = attended[j];
    if (target_words[j] < 0 || position < 0 ||
        static_cast<size_t>(position) >= source_words.size() || source_words[position] < 0) {
      continue;
    }
    links.push_back({source_words[position], target_words[j]});
  }
  std::sort(links.begin(), links.end(), [](const WordLink& a, const WordLink& b) {
    return a.src != b.src ? a.src < b.src : a.tgt < b.tgt;
  });
  links.erase(std::unique(links.begin(), links.end()), links.end());
  return links;
}

WordAttention word_attention(const std::vector<int32_t>& source_words,
                             const std::vector<int32_t>& target_words,
                             const std::vector<float>& rows, int64_t positions) {
  const auto words = [](const std::vector<int32_t>& of) {
    return of.empty() ? 0 : int64_t{*std::max_element(of.begin(), of.end())} + 1;
  };
  WordAttention out{words(source_words), words(target_words), {}};
  out.weights.assign(static_cast<size_t>(out.source_words * out.target_words), 0.0f);
  std::vector<int64_t> pieces(static_cast<size_t>(out.target_words), 0);
  const auto columns = std::min<int64_t>(positions, static_cast<int64_t>(source_words.size()));
  for (size_t j = 0; j < target_words.size() && (j + 1) * positions <= rows.size(); ++j) {
    const int64_t t = target_words[j];
    if (t < 0) continue;
    ++pieces[static_cast<size_t>(t)];
    for (int64_t k = 0; k < columns; ++k) {
      const int64_t s = source_words[static_cast<size_t>(k)];
      if (s < 0) continue;
      out.weights[static_cast<size_t>(t * out.source_words + s)] +=
          rows[j * static_cast<size_t>(positions) + static_cast<size_t>(k)];
    }
  }
  for (int64_t t = 0; t < out.target_words; ++t) {
    const auto n = pieces[static_cast<size_t>(t)];
    for (int64_t s = 0; n > 1 && s < out.source_words; ++s) {
      out.weights[static_cast<size_t>(t * out.source_words + s)] /= static_cast<float>(n);
    }
  }
  return out;
}

WordAttention links_as_attention(const std::vector<WordLink>& links, int64_t source_words,
                                 int64_t target_words) {
  WordAttention out{source_words, target_words, {}};
  out.weights.assign(static_cast<size_t>(source_words * target_words), 0.0f);
  for (const WordLink& link : links) {
    if (link.src < 0 || link.src >= source_words || link.tgt < 0 || link.tgt >= target_words) {
      continue;
    }
    out.weights[static_cast<size_t>(int64_t{link.tgt} * source_words + link.src)] = 1.0f;
  }
  return out;
}

std::string pharaoh(const std::vector<WordLink>& links) {
  std::string text;
  for (const WordLink& link : links) {
    if (!text.empty()) text += ' ';
    text += std::to_string(link.src) + '-' + std::to_string(link.tgt);
  }
  return text;
}

}  // namespace tandem::data
