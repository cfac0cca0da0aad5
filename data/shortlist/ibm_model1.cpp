#include "data/shortlist/ibm_model1.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "trainer/common/fnv_hash.h"

namespace tandem::data {
namespace {

// Whether `id` is a piece of text (the four specials are not).
bool text_piece(int32_t id) { return id >= 4; }

// IBM Model 1's parameters t(e | f) for the (f, e) pairs that share a sentence pair, f = vocab
// for NULL; and, per target token of every pair, where its sources' entries are.
struct Table {
  std::vector<int32_t> source, target;  // per entry
  std::vector<double> t;                // per entry: t(target | source)
  // Per pair and target token, its row of entries (the pair's source tokens, then NULL), flat.
  std::vector<int32_t> rows;
  std::vector<int64_t> row_width;  // per target token, its row's entries (source tokens + 1)
};

Table cooccurrences(const std::vector<SentencePair>& pairs, int32_t null) {
  Table table;
  std::unordered_map<uint64_t, int32_t> entry_of;
  auto entry = [&](int32_t f, int32_t e) {
    const uint64_t key = (static_cast<uint64_t>(f) << 32) | static_cast<uint32_t>(e);
    const auto [it, added] = entry_of.emplace(key, static_cast<int32_t>(table.source.size()));
    if (added) {
      table.source.push_back(f);
      table.target.push_back(e);
    }
    return it->second;
  };
  for (const auto& pair : pairs) {
    std::vector<int32_t> sources;
    for (const int32_t f : pair.src) {
      if (text_piece(f)) sources.push_back(f);
    }
    sources.push_back(null);
    for (const int32_t e : pair.tgt) {
      if (!text_piece(e)) continue;
      for (const int32_t f : sources) table.rows.push_back(entry(f, e));
      table.row_width.push_back(static_cast<int64_t>(sources.size()));
    }
  }
  table.t.assign(table.source.size(), 1.0);  // uniform: every posterior of the first E-step is
  return table;
}

// One EM iteration: expected counts of each entry under the posteriors t(e|f) / sum_f' t(e|f'),
// then t(e | f) = count(f, e) / count(f).
void em_iteration(Table& table, int32_t sources) {
  std::vector<double> count(table.t.size(), 0.0), total(sources, 0.0);
  int64_t at = 0;
  for (const int64_t width : table.row_width) {
    const int32_t* row = table.rows.data() + at;
    double z = 0;
    for (int64_t i = 0; i < width; ++i) z += table.t[row[i]];
    for (int64_t i = 0; i < width; ++i) count[row[i]] += table.t[row[i]] / z;
    at += width;
  }
  for (size_t n = 0; n < count.size(); ++n) total[table.source[n]] += count[n];
  for (size_t n = 0; n < count.size(); ++n) table.t[n] = count[n] / total[table.source[n]];
}

// The `n` most frequent target text pieces of `pairs`, most frequent first (ties: lower id).
std::vector<int32_t> most_frequent(const std::vector<SentencePair>& pairs, int64_t vocab_size,
                                   int64_t n) {
  std::vector<int64_t> count(vocab_size, 0);
  for (const auto& pair : pairs) {
    for (const int32_t e : pair.tgt) {
      if (text_piece(e) && e < vocab_size) ++count[e];
    }
  }
  std::vector<int32_t> ids(vocab_size);
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return count[a] > count[b]; });
  std::vector<int32_t> out;
  for (const int32_t id : ids) {
    if (static_cast<int64_t>(out.size()) == n || count[id] == 0) break;
    out.push_back(id);
  }
  return out;
}

}  // namespace

Shortlist build_shortlist(const std::vector<SentencePair>& pairs, int64_t vocab_size,
                          const std::string& vocab, const ShortlistOptions& options) {
  const auto null = static_cast<int32_t>(vocab_size);
  Table table = cooccurrences(pairs, null);
  for (int64_t i = 0; i < options.iterations; ++i) em_iteration(table, null + 1);
  // Per source piece its entries, best t first (ties: lower target id), top_k kept.
  std::vector<std::vector<int32_t>> by_source(vocab_size);
  for (size_t n = 0; n < table.t.size(); ++n) {
    if (table.source[n] != null) by_source[table.source[n]].push_back(static_cast<int32_t>(n));
  }
  std::vector<std::vector<int32_t>> lists;
  for (auto& entries : by_source) {
    std::stable_sort(entries.begin(), entries.end(), [&](int32_t a, int32_t b) {
      return table.t[a] > table.t[b] ||
             (table.t[a] == table.t[b] && table.target[a] < table.target[b]);
    });
    if (static_cast<int64_t>(entries.size()) > options.top_k) entries.resize(options.top_k);
    lists.emplace_back();
    for (const int32_t n : entries) lists.back().push_back(table.target[n]);
  }
  return Shortlist(most_frequent(pairs, vocab_size, options.frequent), lists,
                   fnv1a(vocab.data(), vocab.size()), options);
}

Shortlist shortlist_from_corpus(const Corpus& corpus, const ShortlistOptions& options) {
  const int64_t size = corpus.has_split("train") ? corpus.size("train") : 0;
  if (size == 0) {
    throw std::invalid_argument("'" + corpus.path() + "' has no train pairs to align");
  }
  const int64_t take = options.max_pairs > 0 ? std::min(size, options.max_pairs) : size;
  std::vector<int64_t> indices;
  for (int64_t i = 0; i < take; ++i) indices.push_back(i * size / take);
  std::vector<SentencePair> pairs;
  constexpr int64_t kBlock = 10000;
  for (int64_t begin = 0; begin < take; begin += kBlock) {
    const std::vector<int64_t> block(indices.begin() + begin,
                                     indices.begin() + std::min(take, begin + kBlock));
    for (auto& pair : corpus.read("train", block)) pairs.push_back(std::move(pair));
  }
  const auto vocab = corpus.vocab();
  return build_shortlist(pairs, vocab.size(), vocab.bytes(), options);
}

}  // namespace tandem::data
