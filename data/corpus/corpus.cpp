// Corpus reader: validates the file on open, keeps each split's sentence lengths on first use and
// reads the tokens of requested sentences as a union of hyperslabs, one H5Dread per side.
#include "data/corpus/corpus.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "data/corpus/corpus_format.h"
#include "trainer/common/error.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::data {
namespace {

namespace format = corpus_format;
constexpr int64_t kMaxFormatVersion = format::kCorporaVersion;
constexpr const char* kHint = "HINT: create a corpus with tandem-prep";

// Sentences between two stored offsets: an offset is found from the one before it and at most
// kBlock - 1 lengths, so a side costs 2 bytes a sentence in memory (not the file's 8).
constexpr int64_t kBlock = 64;
constexpr int64_t kMaxLength = std::numeric_limits<uint16_t>::max() - 1;  // padded still fits
constexpr uint64_t kOffsetsPerRead = uint64_t{1} << 20;  // offsets streamed 8 MiB at a time

// One side (src or tgt) of a split: the open token dataset, each sentence's token count, and every
// kBlock-th sentence's offset into the tokens.
struct SideData {
  h5::Handle tokens;
  std::vector<uint16_t> lengths;       // n entries
  std::vector<int64_t> block_offsets;  // offset of sentence k * kBlock, k = 0 .. n / kBlock

  int64_t count() const { return static_cast<int64_t>(lengths.size()); }
  int64_t offset(int64_t sentence) const {
    int64_t offset = block_offsets[sentence / kBlock];
    for (int64_t i = sentence - sentence % kBlock; i < sentence; ++i) offset += lengths[i];
    return offset;
  }
};

// File access for reading short token ranges at random places: HDF5's data sieve buffer would copy
// 64 KiB around each range (measured: 2.3x slower than without it on a 100k-pair corpus).
h5::Handle random_access() {
  h5::Handle access(h5::check(H5Pcreate(H5P_FILE_ACCESS), "cannot create file access properties"));
  h5::check(H5Pset_sieve_buf_size(access.get(), 0), "cannot disable the sieve buffer");
  return access;
}

// The values of sentences `sorted` (ascending, distinct) on one side (or the alignments' links),
// each checked by `check` (which throws: a damaged file must not reach the model's embedding
// lookup). One H5Dread for them all: per-call overhead, not bytes, dominates reading short
// sentences.
template <class Check>
std::vector<std::vector<int32_t>> read_sentences(const SideData& side,
                                                 const std::vector<int64_t>& sorted,
                                                 const Check& check) {
  std::vector<h5::Range> ranges;
  uint64_t total = 0;
  for (const int64_t i : sorted) {
    const uint64_t count = side.lengths[i];
    if (count > 0) ranges.push_back({static_cast<uint64_t>(side.offset(i)), count});
    total += count;
  }
  std::vector<int32_t> flat(total);
  h5::read_ranges(side.tokens.get(), H5T_NATIVE_INT32, ranges, flat.data());
  std::vector<std::vector<int32_t>> sentences(sorted.size());
  auto next = flat.begin();
  for (size_t k = 0; k < sorted.size(); ++k) {
    const int64_t count = side.lengths[sorted[k]];
    sentences[k].assign(next, next + count);
    check(sorted[k], sentences[k]);
    next += count;
  }
  return sentences;
}

std::vector<int32_t> lengths_of(const SideData& side) {
  return std::vector<int32_t>(side.lengths.begin(), side.lengths.end());
}

}  // namespace

// A split's sides, and its alignments' links if it has them.
struct SplitData {
  SideData src, tgt;
  std::optional<SideData> align;
};

struct Corpus::Impl {
  std::string path;
  h5::Handle file;
  int64_t vocab_size = -1;                  // read with the first sentences
  std::map<std::string, SplitData> splits;  // loaded on first use
  std::optional<Directions> directions;     // read on first use
  // Every call goes through reading(), one at a time: a loader's prefetch thread and validation
  // on the training thread share one Corpus (HDF5 itself serialises calls anyway).
  std::recursive_mutex mutex;

  std::invalid_argument bad(const std::string& what) const {
    return std::invalid_argument("corpus '" + path + "': " + what);
  }
  // `read()`, with HDF5's failures to read the file (std::runtime_error) reported as what they
  // are: a damaged input file.
  template <class Read>
  decltype(auto) reading(const Read& read) {
    const std::lock_guard<std::recursive_mutex> lock(mutex);
    try {
      return read();
    } catch (const std::invalid_argument&) {
      throw;
    } catch (const std::runtime_error& e) {
      throw bad(std::string("cannot read it (damaged file?): ") + e.what());
    }
  }
  SideData open_side(const std::string& split, const std::string& side,
                     const char* values = format::kTokens);
  bool has_split(const std::string& split) const {
    return H5Lexists(file.get(), split.c_str(), H5P_DEFAULT) > 0;
  }
  int64_t pairs_in(const std::string& split);
  std::vector<Direction> read_corpora();
  Directions read_directions();
  const SplitData& split(const std::string& name);
  // std::invalid_argument naming the file unless `values` are pairs of pieces of the pair's sides.
  void check_links(const std::string& split, int64_t pair, const std::vector<int32_t>& values,
                   int64_t src_length, int64_t tgt_length) const;
};

SideData Corpus::Impl::open_side(const std::string& split, const std::string& side,
                                 const char* values) {
  const std::string prefix = "/" + split + "/" + side + "/";
  const std::string tokens_path = prefix + values;
  const std::string offsets_path = prefix + format::kOffsets;
  SideData result;
  result.tokens = h5::Handle(H5Dopen2(file.get(), tokens_path.c_str(), H5P_DEFAULT));
  h5::Handle offsets(H5Dopen2(file.get(), offsets_path.c_str(), H5P_DEFAULT));
  if (!result.tokens.valid() || !offsets.valid()) {
    throw bad("missing " + tokens_path + " or " + offsets_path);
  }
  // Offsets are streamed: they must start at 0, never decrease and end at the token count, or
  // reads go astray.
  const uint64_t entries = h5::dataset_length(offsets.get());
  const uint64_t tokens = h5::dataset_length(result.tokens.get());
  const auto corrupt = [&](const std::string& why) {
    return bad(prefix + "offsets do not match " + prefix + "tokens (" + why + "; corrupt file?)");
  };
  if (entries == 0) throw corrupt("no offsets");
  result.lengths.reserve(entries - 1);
  result.block_offsets.reserve((entries - 1) / kBlock + 1);
  std::vector<int64_t> block;
  int64_t previous = 0;
  for (uint64_t begin = 0; begin < entries; begin += kOffsetsPerRead) {
    block.resize(std::min(kOffsetsPerRead, entries - begin));
    h5::read_range(offsets.get(), H5T_NATIVE_INT64, begin, block.size(), block.data());
    for (size_t k = 0; k < block.size(); ++k) {
      const uint64_t sentence = begin + k;  // the offset where this sentence starts
      const int64_t offset = block[k];
      if (sentence == 0) {
        if (offset != 0) throw corrupt("the first offset is " + std::to_string(offset));
      } else {
        const int64_t length = offset - previous;
        if (length < 0) throw corrupt("offset " + std::to_string(sentence) + " decreases");
        if (length > kMaxLength) {
          throw bad(prefix + " sentence " + std::to_string(sentence - 1) + " has " +
                    std::to_string(length) + " tokens; at most " + std::to_string(kMaxLength) +
                    " are supported (tandem-prep --max-len)");
        }
        result.lengths.push_back(static_cast<uint16_t>(length));
      }
      if (sentence % kBlock == 0) result.block_offsets.push_back(offset);
      previous = offset;
    }
  }
  if (static_cast<uint64_t>(previous) != tokens) {
    throw corrupt("the last offset is " + std::to_string(previous) + " of " +
                  std::to_string(tokens) + " " + values);
  }
  return result;
}

const SplitData& Corpus::Impl::split(const std::string& name) {
  const auto cached = splits.find(name);
  if (cached != splits.end()) return cached->second;
  if (!has_split(name)) {
    throw bad("no split '" + name + "'; expected one that tandem-prep wrote (train, valid, test)");
  }
  SplitData data{open_side(name, format::kSource), open_side(name, format::kTarget), {}};
  if (data.src.count() != data.tgt.count()) {
    throw bad("split '" + name + "' has different sentence counts on its src and tgt sides");
  }
  const std::string align = "/" + name + "/" + format::kAlignment;
  if (H5Lexists(file.get(), align.c_str(), H5P_DEFAULT) > 0) {
    data.align = open_side(name, format::kAlignment, format::kLinks);
    if (data.align->count() != data.src.count()) {
      throw bad(align + " has links for " + std::to_string(data.align->count()) + " pairs of " +
                std::to_string(data.src.count()) + " (damaged file?)");
    }
  }
  return splits.emplace(name, std::move(data)).first->second;
}

Corpus::Corpus(const std::string& path) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  if (!std::ifstream(path)) throw_cannot_open("corpus", path);
  h5::QuietErrors quiet;
  if (H5Fis_hdf5(path.c_str()) <= 0) throw impl_->bad(std::string("not an HDF5 file; ") + kHint);
  impl_->file = h5::Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, random_access().get()));
  if (!impl_->file.valid()) throw impl_->bad("HDF5 cannot open it (damaged file?)");
  const std::optional<std::string> format_name = impl_->reading(
      [&] { return h5::read_string_attribute(impl_->file.get(), format::kFormatAttribute); });
  if (format_name != format::kFormat) {
    throw impl_->bad(std::string("not a Tandem corpus (no root attribute format=\"") +
                     format::kFormat + "\"); " + kHint);
  }
  const std::optional<int64_t> version = impl_->reading(
      [&] { return h5::read_int_attribute(impl_->file.get(), format::kVersionAttribute); });
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
    h5::Handle dataset(H5Dopen2(impl_->file.get(), format::kVocab, H5P_DEFAULT));
    if (!dataset.valid()) throw impl_->bad(std::string("missing /") + format::kVocab);
    std::string bytes(h5::dataset_length(dataset.get()), '\0');
    h5::read_range(dataset.get(), H5T_NATIVE_UINT8, 0, bytes.size(), bytes.data());
    return Vocab::from_bytes(bytes);
  });
}

bool Corpus::has_split(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return impl_->has_split(split); });
}

// Pairs in a split, from its offsets' length alone: without reading the split (a split's sizes are
// read when it is first used, and tandem-eval on the test split never uses train).
int64_t Corpus::Impl::pairs_in(const std::string& split) {
  const std::string path = "/" + split + "/" + format::kSource + "/" + format::kOffsets;
  h5::Handle offsets(H5Dopen2(file.get(), path.c_str(), H5P_DEFAULT));
  if (!offsets.valid()) throw bad("missing " + path);
  const uint64_t entries = h5::dataset_length(offsets.get());
  if (entries == 0) throw bad(path + " is empty");
  return static_cast<int64_t>(entries - 1);
}

// /corpora/<name> as written, in creation order; none for a file of one corpus.
std::vector<Direction> Corpus::Impl::read_corpora() {
  std::vector<Direction> found;
  h5::Handle all = h5::open_group(file.get(), format::kCorpora);
  if (!all.valid()) return found;
  for (const std::string& name : h5::link_names(all.get())) {
    const std::string where = "/" + std::string(format::kCorpora) + "/" + name;
    h5::Handle group = h5::open_group(all.get(), name);
    if (!group.valid()) throw bad(where + " is not a group");
    Direction direction;
    direction.name = name;
    direction.src_lang =
        h5::read_string_attribute(group.get(), format::kSourceLanguage).value_or("");
    direction.tgt_lang =
        h5::read_string_attribute(group.get(), format::kTargetLanguage).value_or("");
    direction.tag = h5::read_string_attribute(group.get(), format::kTag).value_or("");
    for (const char* split : format::kSplits) {
      h5::Handle range = h5::open_group(group.get(), split);
      if (!range.valid()) continue;
      const auto first = h5::read_int_attribute(range.get(), format::kFirst);
      const auto count = h5::read_int_attribute(range.get(), format::kCount);
      if (!first || !count) throw bad(where + "/" + split + " lacks its first or count");
      direction.splits[split] = {*first, *count};
    }
    found.push_back(std::move(direction));
  }
  return found;
}

// The directions /corpora names, checked to tile each split in order; a file of one corpus is one
// direction over every split whole.
Directions Corpus::Impl::read_directions() {
  std::vector<Direction> directions = read_corpora();
  if (directions.empty()) {
    Direction whole;
    for (const char* split : format::kSplits) {
      if (has_split(split)) whole.splits[split] = {0, pairs_in(split)};
    }
    return Directions({whole});
  }
  for (const char* split : format::kSplits) {
    if (!has_split(split)) continue;
    int64_t next = 0;  // each corpus's pairs start where the previous one's end
    for (const Direction& direction : directions) {
      const PairRange* range = direction.range(split);
      if (range == nullptr) continue;
      if (range->first != next || range->count < 0) {
        throw bad("/" + std::string(format::kCorpora) + "/" + direction.name + "/" + split +
                  " starts at pair " + std::to_string(range->first) + "; expected " +
                  std::to_string(next) + " (damaged file?)");
      }
      next += range->count;
    }
    if (next != pairs_in(split)) {
      throw bad(std::string("the corpora's ") + split + " ranges cover " + std::to_string(next) +
                " pairs of " + std::to_string(pairs_in(split)) + " (damaged file?)");
    }
  }
  return Directions(std::move(directions));
}

const Directions& Corpus::directions() const {
  h5::QuietErrors quiet;
  return impl_->reading([&]() -> const Directions& {
    if (!impl_->directions) impl_->directions = impl_->read_directions();
    return *impl_->directions;
  });
}

int64_t Corpus::size(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return impl_->split(split).src.count(); });
}

std::vector<int32_t> Corpus::src_lengths(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return lengths_of(impl_->split(split).src); });
}

std::vector<int32_t> Corpus::tgt_lengths(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return lengths_of(impl_->split(split).tgt); });
}

std::vector<uint16_t> Corpus::padded_lengths(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] {
    const SplitData& data = impl_->split(split);
    std::vector<uint16_t> padded(data.src.lengths.size());
    for (size_t i = 0; i < padded.size(); ++i) {
      padded[i] = static_cast<uint16_t>(std::max(data.src.lengths[i], data.tgt.lengths[i]) + 1);
    }
    return padded;
  });
}

std::vector<SentencePair> Corpus::read(const std::string& split,
                                       const std::vector<int64_t>& indices, Links links) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return read_pairs(split, indices, links); });
}

bool Corpus::has_alignments(const std::string& split) const {
  h5::QuietErrors quiet;
  return impl_->reading([&] { return impl_->split(split).align.has_value(); });
}

std::vector<SentencePair> Corpus::read_pairs(const std::string& split,
                                             const std::vector<int64_t>& indices,
                                             Links links) const {
  const SplitData& data = impl_->split(split);
  const int64_t count = data.src.count();
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
  const auto check_ids = [&](int64_t, const std::vector<int32_t>& ids) {
    for (const int32_t id : ids) {
      if (id < 0 || id >= impl_->vocab_size) {
        throw impl_->bad("token id " + std::to_string(id) + " is outside its vocabulary of " +
                         std::to_string(impl_->vocab_size) + " pieces (damaged file?)");
      }
    }
  };
  const auto src_tokens = read_sentences(data.src, sorted, check_ids);
  const auto tgt_tokens = read_sentences(data.tgt, sorted, check_ids);
  std::vector<std::vector<int32_t>> pair_links(sorted.size());
  if (links == Links::kRead && data.align) {
    pair_links =
        read_sentences(*data.align, sorted, [&](int64_t pair, const std::vector<int32_t>& values) {
          impl_->check_links(split, pair, values, data.src.lengths[pair], data.tgt.lengths[pair]);
        });
  }
  std::vector<SentencePair> pairs(indices.size());
  for (size_t i = 0; i < indices.size(); ++i) {
    const auto k = std::lower_bound(sorted.begin(), sorted.end(), indices[i]) - sorted.begin();
    pairs[i] = {src_tokens[k], tgt_tokens[k], pair_links[k]};
  }
  return pairs;
}

void Corpus::Impl::check_links(const std::string& split, int64_t pair,
                               const std::vector<int32_t>& values, int64_t src_length,
                               int64_t tgt_length) const {
  bool fits = values.size() % 2 == 0;
  for (size_t k = 0; fits && k < values.size(); k += 2) {
    fits = values[k] >= 0 && values[k] < src_length && values[k + 1] >= 0 &&
           values[k + 1] < tgt_length;
  }
  if (!fits) {
    throw bad("/" + split + "/" + format::kAlignment + ": the links of pair " +
              std::to_string(pair) + " do not fit its " + std::to_string(src_length) + " and " +
              std::to_string(tgt_length) + " tokens (damaged file?)");
  }
}

}  // namespace tandem::data
