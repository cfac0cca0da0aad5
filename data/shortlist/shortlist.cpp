#include "data/shortlist/shortlist.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "trainer/common/atomic_file.h"
#include "trainer/common/fnv_hash.h"
#include "trainer/common/token_ids.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::data {
namespace {

constexpr const char* kKind = "tandem-shortlist";

}  // namespace

Shortlist::Shortlist(std::vector<int32_t> frequent, const std::vector<std::vector<int32_t>>& lists,
                     uint64_t vocab_hash, const ShortlistOptions& options)
    : frequent_(std::move(frequent)), vocab_hash_(vocab_hash), options_(options) {
  offsets_.push_back(0);
  for (const auto& list : lists) {
    targets_.insert(targets_.end(), list.begin(), list.end());
    offsets_.push_back(static_cast<int64_t>(targets_.size()));
  }
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
    out.vocab_hash_ =
        hash_from_text(h5::read_string_attribute(file.get(), "vocab_hash").value_or(""),
                       "'" + path + "' vocab_hash");
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
  if (!sound)
    throw std::invalid_argument("'" + path + "' is not a sound shortlist: its lists are damaged");
  return out;
}

}  // namespace tandem::data
