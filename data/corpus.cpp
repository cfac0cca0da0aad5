// Corpus reader: validates the file on open, caches each split's offsets on first use and reads
// the tokens of requested sentences as a union of hyperslabs, one H5Dread per side.
#include "data/corpus.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>

#include "trainer/common/error.h"
#include "trainer/common/hdf5.h"

namespace tandem::data {
namespace {

constexpr const char* kFormat = "tandem-corpus";
constexpr int64_t kMaxFormatVersion = 1;
constexpr const char* kHint = "HINT: create a corpus with tandem-prep";

// One side (src or tgt) of a split: the open token dataset and all its offsets.
struct Side {
  h5::Handle tokens;
  std::vector<int64_t> offsets;  // n + 1 entries
};

// File access for reading short token ranges at random places: HDF5's data sieve buffer would copy
// 64 KiB around each range (measured: 2.3x slower than without it on a 100k-pair corpus).
h5::Handle random_access() {
  h5::Handle access(h5::check(H5Pcreate(H5P_FILE_ACCESS), "cannot create file access properties"));
  h5::check(H5Pset_sieve_buf_size(access.get(), 0), "cannot disable the sieve buffer");
  return access;
}

// Offsets must start at 0, never decrease and end at the token count, or reads go astray.
bool offsets_consistent(const std::vector<int64_t>& offsets, uint64_t tokens) {
  if (offsets.empty() || offsets.front() != 0) return false;
  for (size_t i = 1; i < offsets.size(); ++i) {
    if (offsets[i] < offsets[i - 1]) return false;
  }
  return static_cast<uint64_t>(offsets.back()) == tokens;
}

// The tokens of sentences `sorted` (ascending, distinct) on one side, each an id below
// `vocab_size` (std::invalid_argument via `bad` otherwise: a damaged file must not reach the
// model's embedding lookup). One H5Dread for them all: per-call overhead, not bytes, dominates
// reading short sentences.
template <class Bad>
std::vector<std::vector<int32_t>> read_sentences(const Side& side,
                                                 const std::vector<int64_t>& sorted,
                                                 int64_t vocab_size, const Bad& bad) {
  std::vector<h5::Range> ranges;
  uint64_t total = 0;
  for (const int64_t i : sorted) {
    const auto count = static_cast<uint64_t>(side.offsets[i + 1] - side.offsets[i]);
    if (count > 0) ranges.push_back({static_cast<uint64_t>(side.offsets[i]), count});
    total += count;
  }
  std::vector<int32_t> flat(total);
  h5::read_ranges(side.tokens.get(), H5T_NATIVE_INT32, ranges, flat.data());
  for (const int32_t id : flat) {
    if (id < 0 || id >= vocab_size) {
      throw bad("token id " + std::to_string(id) + " is outside its vocabulary of " +
                std::to_string(vocab_size) + " pieces (damaged file?)");
    }
  }
  std::vector<std::vector<int32_t>> sentences(sorted.size());
  auto next = flat.begin();
  for (size_t k = 0; k < sorted.size(); ++k) {
    const int64_t count = side.offsets[sorted[k] + 1] - side.offsets[sorted[k]];
    sentences[k].assign(next, next + count);
    next += count;
  }
  return sentences;
}

std::vector<int32_t> lengths_of(const std::vector<int64_t>& offsets) {
  std::vector<int32_t> lengths(offsets.size() - 1);
  for (size_t i = 0; i + 1 < offsets.size(); ++i) {
    lengths[i] = static_cast<int32_t>(offsets[i + 1] - offsets[i]);
  }
  return lengths;
}

}  // namespace

struct Corpus::Impl {
  std::string path;
  h5::Handle file;
  int64_t vocab_size = -1;                              // read with the first sentences
  std::map<std::string, std::pair<Side, Side>> splits;  // (src, tgt), loaded on first use

  std::invalid_argument bad(const std::string& what) const {
    return std::invalid_argument("corpus '" + path + "': " + what);
  }
  // `read()`, with HDF5's failures to read the file (std::runtime_error) reported as what they
  // are: a damaged input file.
  template <class Read>
  auto reading(const Read& read) const {
    try {
      return read();
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw bad(std::string("cannot read it (damaged file?): ") + e.what());
    }
  }
  Side open_side(const std::string& split, const std::string& side);
  const std::pair<Side, Side>& split(const std::string& name);
};

Side Corpus::Impl::open_side(const std::string& split, const std::string& side) {
  const std::string prefix = "/" + split + "/" + side + "/";
  Side result;
  result.tokens = h5::Handle(H5Dopen2(file.get(), (prefix + "tokens").c_str(), H5P_DEFAULT));
  h5::Handle offsets(H5Dopen2(file.get(), (prefix + "offsets").c_str(), H5P_DEFAULT));
  if (!result.tokens.valid() || !offsets.valid()) {
    throw bad("missing " + prefix + "tokens or " + prefix + "offsets");
  }
  result.offsets.resize(h5::dataset_length(offsets.get()));
  h5::read_range(offsets.get(), H5T_NATIVE_INT64, 0, result.offsets.size(), result.offsets.data());
  if (!offsets_consistent(result.offsets, h5::dataset_length(result.tokens.get()))) {
    throw bad(prefix + "offsets do not match " + prefix + "tokens (corrupt file?)");
  }
  return result;
}

const std::pair<Side, Side>& Corpus::Impl::split(const std::string& name) {
  const auto cached = splits.find(name);
  if (cached != splits.end()) return cached->second;
  if (H5Lexists(file.get(), name.c_str(), H5P_DEFAULT) <= 0) {
    throw bad("no split '" + name + "'; expected one that tandem-prep wrote (train, valid, test)");
  }
  Side src = open_side(name, "src");
  Side tgt = open_side(name, "tgt");
  if (src.offsets.size() != tgt.offsets.size()) {
    throw bad("split '" + name + "' has different sentence counts on its src and tgt sides");
  }
  return splits.emplace(name, std::make_pair(std::move(src), std::move(tgt))).first->second;
}

Corpus::Corpus(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  if (!std::ifstream(path)) throw_cannot_open("corpus", path);
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) throw impl_->bad(std::string("not an HDF5 file; ") + kHint);
  impl_->file = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, random_access().get()));
  if (!impl_->file.valid()) throw impl_->bad("HDF5 cannot open it (damaged file?)");
  const std::optional<std::string> format =
      impl_->reading([&] { return h5::read_string_attribute(impl_->file.get(), "format"); });
  if (format != kFormat) {
    throw impl_->bad(std::string("not a Tandem corpus (no root attribute format=\"") + kFormat +
                     "\"); " + kHint);
  }
  const std::optional<int64_t> version =
      impl_->reading([&] { return h5::read_int_attribute(impl_->file.get(), "format_version"); });
  if (!version || *version < 1 || *version > kMaxFormatVersion) {
    throw impl_->bad("format_version " + (version ? std::to_string(*version) : "(missing)") +
                     " is not supported; expected " + std::to_string(kMaxFormatVersion) +
                     " or older");
  }
}

Corpus::Corpus(Corpus&&) noexcept = default;
Corpus::~Corpus() = default;

const std::string& Corpus::path() const { return impl_->path; }

Vocab Corpus::vocab() const {
  h5::QuietErrors quiet;
  return impl_->reading([&] {
    h5::Handle dataset(H5Dopen2(impl_->file.get(), "/vocab", H5P_DEFAULT));
    if (!dataset.valid()) throw impl_->bad("missing /vocab");
    std::string bytes(h5::dataset_length(dataset.get()), '\0');
    h5::read_range(dataset.get(), H5T_NATIVE_UINT8, 0, bytes.size(), bytes.data());
    return Vocab::from_bytes(bytes);
  });
}

bool Corpus::has_split(const std::string& split) const {
  h5::QuietErrors quiet;
  return H5Lexists(impl_->file.get(), split.c_str(), H5P_DEFAULT) > 0;
}

int64_t Corpus::size(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading(
      [&] { return static_cast<int64_t>(impl_->split(split).first.offsets.size()) - 1; });
}

std::vector<int32_t> Corpus::src_lengths(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return lengths_of(impl_->split(split).first.offsets); });
}

std::vector<int32_t> Corpus::tgt_lengths(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return lengths_of(impl_->split(split).second.offsets); });
}

std::vector<SentencePair> Corpus::read(const std::string& split,
                                       const std::vector<int64_t>& indices) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return read_pairs(split, indices); });
}

std::vector<SentencePair> Corpus::read_pairs(const std::string& split,
                                             const std::vector<int64_t>& indices) const {
  const auto& [src, tgt] = impl_->split(split);
  const int64_t count = static_cast<int64_t>(src.offsets.size()) - 1;
  for (const int64_t index : indices) {
    if (index < 0 || index >= count) {
      throw impl_->bad("sentence " + std::to_string(index) + " is out of range for split '" +
                       split + "' of " + std::to_string(count) + " pairs");
    }
  }
  std::vector<int64_t> sorted = indices;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  if (impl_->vocab_size < 0) impl_->vocab_size = vocab().size();
  const auto bad = [this](const std::string& what) { return impl_->bad(what); };
  const auto src_tokens = read_sentences(src, sorted, impl_->vocab_size, bad);
  const auto tgt_tokens = read_sentences(tgt, sorted, impl_->vocab_size, bad);
  std::vector<SentencePair> pairs(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto k = std::lower_bound(sorted.begin(), sorted.end(), indices[i]) - sorted.begin();
    pairs[i] = {src_tokens[k], tgt_tokens[k]};
  }
  return pairs;
}

}  // namespace tandem::data
