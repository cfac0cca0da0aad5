#include "data/prep/spill.h"

namespace tandem::data {

void SpilledSide::append(const std::vector<int32_t>& tokens, const std::vector<int64_t>& lengths) {
  tokens_.append(tokens.data(), tokens.size());
  std::vector<int64_t> offsets(lengths.size());
  for (size_t i = 0; i < lengths.size(); ++i) offsets[i] = end_ += lengths[i];
  offsets_.append(offsets.data(), offsets.size());
}

void SpilledSide::append_empty(int64_t count) {
  const std::vector<int64_t> ends(std::min<int64_t>(count, kSpillBlock), end_);
  for (int64_t done = 0; done < count; done += static_cast<int64_t>(ends.size())) {
    offsets_.append(ends.data(), std::min<size_t>(ends.size(), count - done));
  }
}

void SpilledSide::write(hid_t split_group, const std::string& side, const char* values) {
  namespace format = corpus_format;
  h5::Handle group = h5::create_group(split_group, side);
  // Tokens are read a sentence at a time at random places (contiguous); offsets are read whole.
  h5::Handle tokens = h5::create_dataset(group.get(), values, H5T_STD_I32LE, tokens_.count(),
                                         h5::Layout::kContiguous);
  tokens_.copy_to(tokens.get(), H5T_NATIVE_INT32);
  h5::Handle offsets = h5::create_dataset(group.get(), format::kOffsets, H5T_STD_I64LE,
                                          offsets_.count(), h5::Layout::kCompressed);
  offsets_.copy_to(offsets.get(), H5T_NATIVE_INT64);
}

}  // namespace tandem::data
