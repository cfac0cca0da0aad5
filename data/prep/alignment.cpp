#include "data/prep/alignment.h"

#include <algorithm>
#include <stdexcept>
#include <utility>

#include "trainer/common/whole_number.h"

namespace tandem::data {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; }

// One field "i-j" checked against the sentences' word counts.
WordLink parse_link(const std::string& field, size_t src_words, size_t tgt_words) {
  const size_t dash = field.find('-');
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("link '" + field + "': " + why);
  };
  if (dash == std::string::npos) throw bad("expected i-j (source word - target word, from 0)");
  const std::optional<int64_t> src = parse_whole_number(field.substr(0, dash));
  const std::optional<int64_t> tgt = parse_whole_number(field.substr(dash + 1));
  if (!src || !tgt || *src < 0 || *tgt < 0) {
    throw bad("expected i-j with whole numbers from 0 (source word - target word)");
  }
  const auto past = [&](const char* side, int64_t word, size_t words) {
    return bad(std::string(side) + " word " + std::to_string(word) + " is past the line's " +
               std::to_string(words) + " words (counted from 0, split at white space)");
  };
  if (static_cast<uint64_t>(*src) >= src_words) throw past("source", *src, src_words);
  if (static_cast<uint64_t>(*tgt) >= tgt_words) throw past("target", *tgt, tgt_words);
  return {static_cast<int32_t>(*src), static_cast<int32_t>(*tgt)};
}

}  // namespace

std::vector<WordLink> parse_pharaoh(const std::string& line, size_t src_words, size_t tgt_words) {
  std::vector<WordLink> links;
  size_t at = 0;
  while (at < line.size()) {
    if (is_space(line[at])) {
      ++at;
      continue;
    }
    size_t end = at;
    while (end < line.size() && !is_space(line[end])) ++end;
    links.push_back(parse_link(line.substr(at, end - at), src_words, tgt_words));
    at = end;
  }
  return links;
}

std::vector<int32_t> piece_links(const std::vector<WordLink>& links,
                                 const std::vector<int32_t>& src_words,
                                 const std::vector<int32_t>& tgt_words) {
  // The pieces of each word, in order.
  const auto pieces_of = [](const std::vector<int32_t>& words) {
    std::vector<std::vector<int32_t>> pieces;
    for (size_t p = 0; p < words.size(); ++p) {
      if (words[p] < 0) continue;
      if (static_cast<size_t>(words[p]) >= pieces.size()) pieces.resize(words[p] + 1);
      pieces[words[p]].push_back(static_cast<int32_t>(p));
    }
    return pieces;
  };
  const std::vector<std::vector<int32_t>> src_pieces = pieces_of(src_words);
  const std::vector<std::vector<int32_t>> tgt_pieces = pieces_of(tgt_words);
  std::vector<std::pair<int32_t, int32_t>> pairs;  // (q, p)
  for (const WordLink& link : links) {
    if (static_cast<size_t>(link.src) >= src_pieces.size() ||
        static_cast<size_t>(link.tgt) >= tgt_pieces.size()) {
      continue;  // a word the normalizer removed whole has no pieces
    }
    for (const int32_t q : tgt_pieces[link.tgt]) {
      for (const int32_t p : src_pieces[link.src]) pairs.emplace_back(q, p);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
  std::vector<int32_t> flat;
  flat.reserve(2 * pairs.size());
  for (const auto& [q, p] : pairs) flat.insert(flat.end(), {p, q});
  return flat;
}

}  // namespace tandem::data
