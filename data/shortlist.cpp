#include "data/shortlist.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

#include "trainer/common/atomic_file.h"
#include "trainer/common/fnv_hash.h"
#include "trainer/common/hdf5.h"
#include "trainer/common/token_ids.h"

namespace tandem::data {
namespace {

constexpr const char* kKind = "tandem-shortlist";

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
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return count[a] > count[b]; });
  std::vector<int32_t> out;
  for (const int32_t id : ids) {
    if (static_cast<int64_t>(out.size()) == n || count[id] == 0) break;
    out.push_back(id);
  }
  return out;
}

}  // namespace

Shortlist Shortlist::build(const std::vector<SentencePair>& pairs, int64_t vocab_size,
                           const std::string& vocab, const ShortlistOptions& options) {
  const auto null = static_cast<int32_t>(vocab_size);
  Table table = cooccurrences(pairs, null);
  for (int64_t i = 0; i < options.iterations; ++i) em_iteration(table, null + 1);
  // Per source piece its entries, best t first (ties: lower target id), top_k kept.
  std::vector<std::vector<int32_t>> by_source(vocab_size);
  for (size_t n = 0; n < table.t.size(); ++n) {
    if (table.source[n] != null) by_source[table.source[n]].push_back(static_cast<int32_t>(n));
  }
  Shortlist out;
  out.options_ = options;
  out.vocab_hash_ = fnv1a(vocab.data(), vocab.size());
  out.frequent_ = most_frequent(pairs, vocab_size, options.frequent);
  out.offsets_.push_back(0);
  for (auto& entries : by_source) {
    std::stable_sort(entries.begin(), entries.end(), [&](int32_t a, int32_t b) {
      return table.t[a] > table.t[b] || (table.t[a] == table.t[b] && table.target[a] < table.target[b]);
    });
    if (static_cast<int64_t>(entries.size()) > options.top_k) entries.resize(options.top_k);
    for (const int32_t n : entries) out.targets_.push_back(table.target[n]);
    out.offsets_.push_back(static_cast<int64_t>(out.targets_.size()));
  }
  return out;
}

Shortlist Shortlist::from_corpus(const Corpus& corpus, const ShortlistOptions& options) {
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
  return build(pairs, vocab.size(), vocab.bytes(), options);
}

bool Shortlist::built_on(const Vocab& vocab) const {
  const auto bytes = vocab.bytes();
  return vocab_hash_ == fnv1a(bytes.data(), bytes.size());
}

uint64_t Shortlist::fingerprint() const {
  uint64_t hash = fnv1a(&vocab_hash_, sizeof vocab_hash_);
  hash = fnv1a(frequent_.data(), frequent_.size() * sizeof(int32_t), hash);
  hash = fnv1a(offsets_.data(), offsets_.size() * sizeof(int64_t), hash);
  return fnv1a(targets_.data(), targets_.size() * sizeof(int32_t), hash);
}

std::vector<int32_t> Shortlist::targets_of(int32_t source) const {
  if (source < 0 || source >= vocab_size()) return {};
  return {targets_.begin() + offsets_[source], targets_.begin() + offsets_[source + 1]};
}

std::vector<int64_t> Shortlist::candidates(const std::vector<std::vector<int32_t>>& sources,
                                           const std::vector<int32_t>& extra) const {
  std::vector<char> in(vocab_size(), 0);
  auto add = [&](int32_t id) {
    if (id >= 0 && id < vocab_size()) in[id] = 1;
  };
  for (const int32_t id : frequent_) add(id);
  for (const int32_t id : extra) add(id);
  std::vector<char> seen(vocab_size(), 0);
  for (const auto& sentence : sources) {
    for (const int32_t s : sentence) {
      if (s < 0 || s >= vocab_size() || seen[s]) continue;
      seen[s] = 1;
      for (int64_t n = offsets_[s]; n < offsets_[s + 1]; ++n) in[targets_[n]] = 1;
    }
  }
  std::vector<int64_t> out;
  for (int64_t id = 0; id < vocab_size(); ++id) {
    if (in[id]) out.push_back(id);
  }
  return out;
}

void Shortlist::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    h5::QuietErrors quiet;
    h5::Handle file(h5::check(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT),
                              "cannot create '" + tmp + "'"));
    h5::write_attribute(file.get(), "kind", std::string(kKind));
    h5::write_attribute(file.get(), "vocab_hash", hash_text(vocab_hash_));
    h5::write_attribute(file.get(), "top_k", options_.top_k);
    h5::write_attribute(file.get(), "frequent", options_.frequent);
    h5::write_attribute(file.get(), "iterations", options_.iterations);
    h5::write_attribute(file.get(), "max_pairs", options_.max_pairs);
    h5::write_vector(file.get(), "frequent", frequent_, h5::Layout::kCompressed);
    h5::write_vector(file.get(), "offsets", offsets_, h5::Layout::kCompressed);
    h5::write_vector(file.get(), "targets", targets_, h5::Layout::kCompressed);
    h5::check(file.close(), "cannot write '" + tmp + "'");
  }
  publish_file(tmp, path);
}

namespace {

template <typename T>
std::vector<T> read_all(hid_t file, const std::string& name, hid_t type, const std::string& path) {
  h5::Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) {
    throw std::invalid_argument("'" + path + "' is not a shortlist: it has no /" + name);
  }
  std::vector<T> out(h5::dataset_length(dataset.get()));
  if (!out.empty()) h5::read_range(dataset.get(), type, 0, out.size(), out.data());
  return out;
}

}  // namespace

Shortlist Shortlist::load(const std::string& path) {
  if (!h5::is_hdf5(path)) {
    throw std::invalid_argument("'" + path + "' is not a shortlist (not an HDF5 file, or missing)");
  }
  h5::QuietErrors quiet;
  h5::Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid() || h5::read_string_attribute(file.get(), "kind").value_or("") != kKind) {
    throw std::invalid_argument("'" + path + "' is not a shortlist (tandem-shortlist writes one)");
  }
  Shortlist out;
  try {
    out.vocab_hash_ = hash_from_text(
        h5::read_string_attribute(file.get(), "vocab_hash").value_or(""), "'" + path + "' vocab_hash");
    out.options_.top_k = h5::read_int_attribute(file.get(), "top_k").value_or(0);
    out.options_.frequent = h5::read_int_attribute(file.get(), "frequent").value_or(0);
    out.options_.iterations = h5::read_int_attribute(file.get(), "iterations").value_or(0);
    out.options_.max_pairs = h5::read_int_attribute(file.get(), "max_pairs").value_or(0);
    out.frequent_ = read_all<int32_t>(file.get(), "frequent", H5T_NATIVE_INT32, path);
    out.offsets_ = read_all<int64_t>(file.get(), "offsets", H5T_NATIVE_INT64, path);
    out.targets_ = read_all<int32_t>(file.get(), "targets", H5T_NATIVE_INT32, path);
  } catch (const std::invalid_argument&) {
    throw;
  } catch (const std::exception& e) {
    throw std::invalid_argument("'" + path + "' is not a readable shortlist: " + e.what());
  }
  const auto vocab = static_cast<int64_t>(out.offsets_.size()) - 1;
  bool sound = vocab >= 0 && out.offsets_.front() == 0 &&
               out.offsets_.back() == static_cast<int64_t>(out.targets_.size()) &&
               std::is_sorted(out.offsets_.begin(), out.offsets_.end());
  for (const int32_t id : out.targets_) sound = sound && id >= 0 && id < vocab;
  for (const int32_t id : out.frequent_) sound = sound && id >= 0 && id < vocab;
  if (!sound) throw std::invalid_argument("'" + path + "' is not a sound shortlist: its lists are damaged");
  return out;
}

}  // namespace tandem::data
