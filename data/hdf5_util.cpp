#include "data/hdf5_util.h"

#include <algorithm>
#include <stdexcept>

namespace tandem::data::h5 {
namespace {

// Compressed datasets are read whole, so chunks are large: 64 Ki elements.
constexpr hsize_t kChunkElements = 1 << 16;
constexpr unsigned kDeflateLevel = 4;

Handle string_type(size_t size) {
  Handle type(check(H5Tcopy(H5T_C_S1), "copy string type"));
  check(H5Tset_size(type.get(), size), "set string size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "set string padding");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "set string charset");
  return type;
}

Handle dataset_creation(uint64_t count, Layout layout) {
  Handle plist(check(H5Pcreate(H5P_DATASET_CREATE), "create dataset property list"));
  // No modification times: the same inputs then give a byte-identical file.
  check(H5Pset_obj_track_times(plist.get(), 0), "turn off time tracking");
  // Chunked layouts need a non-empty extent: an empty dataset stays contiguous.
  if (layout == Layout::kContiguous || count == 0) return plist;
  const hsize_t chunk = std::min<hsize_t>(count, kChunkElements);
  check(H5Pset_chunk(plist.get(), 1, &chunk), "set chunk size");
  // Byte shuffle first: token ids are small, so their high bytes compress to nothing.
  check(H5Pset_shuffle(plist.get()), "set shuffle filter");
  check(H5Pset_deflate(plist.get(), kDeflateLevel), "set deflate filter");
  check(H5Pset_fletcher32(plist.get()), "set Fletcher32 checksum");
  return plist;
}

}  // namespace

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    reset();
    id_ = other.release();
  }
  return *this;
}

hid_t Handle::release() {
  const hid_t id = id_;
  id_ = -1;
  return id;
}

void Handle::reset() {
  if (id_ < 0) return;
  switch (H5Iget_type(id_)) {
    case H5I_FILE:
      H5Fclose(id_);
      break;
    case H5I_GROUP:
      H5Gclose(id_);
      break;
    case H5I_DATASET:
      H5Dclose(id_);
      break;
    case H5I_DATASPACE:
      H5Sclose(id_);
      break;
    case H5I_DATATYPE:
      H5Tclose(id_);
      break;
    case H5I_ATTR:
      H5Aclose(id_);
      break;
    case H5I_GENPROP_LST:
      H5Pclose(id_);
      break;
    default:
      break;
  }
  id_ = -1;
}

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &saved_func_, &saved_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, saved_func_, saved_data_); }

hid_t check(hid_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error("HDF5: cannot " + what);
  return status;
}

Handle create_group(hid_t parent, const std::string& name) {
  Handle plist(check(H5Pcreate(H5P_GROUP_CREATE), "create group property list"));
  check(H5Pset_obj_track_times(plist.get(), 0), "turn off time tracking");  // reproducible files
  return Handle(check(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, plist.get(), H5P_DEFAULT),
                      "create group '" + name + "'"));
}

void write_dataset(hid_t parent, const std::string& name, hid_t mem_type, hid_t file_type,
                   const void* data, uint64_t count, Layout layout) {
  const hsize_t dims = count;
  Handle space(check(H5Screate_simple(1, &dims, nullptr), "create dataspace for " + name));
  Handle plist = dataset_creation(count, layout);
  Handle dataset(check(H5Dcreate2(parent, name.c_str(), file_type, space.get(), H5P_DEFAULT,
                                  plist.get(), H5P_DEFAULT),
                       "create dataset '" + name + "'"));
  if (count == 0) return;
  check(H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
        "write dataset '" + name + "'");
}

void write_vector(hid_t parent, const std::string& name, const std::vector<int32_t>& values,
                  Layout layout) {
  write_dataset(parent, name, H5T_NATIVE_INT32, H5T_STD_I32LE, values.data(), values.size(),
                layout);
}

void write_vector(hid_t parent, const std::string& name, const std::vector<int64_t>& values,
                  Layout layout) {
  write_dataset(parent, name, H5T_NATIVE_INT64, H5T_STD_I64LE, values.data(), values.size(),
                layout);
}

void write_bytes(hid_t parent, const std::string& name, const std::string& bytes) {
  write_dataset(parent, name, H5T_NATIVE_UINT8, H5T_STD_U8LE, bytes.data(), bytes.size(),
                Layout::kCompressed);
}

uint64_t dataset_length(hid_t dataset) {
  Handle space(check(H5Dget_space(dataset), "get dataspace"));
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    throw std::runtime_error("HDF5: expected a 1-D dataset");
  }
  hsize_t dims = 0;
  check(H5Sget_simple_extent_dims(space.get(), &dims, nullptr), "get dataset extent");
  return dims;
}

void read_range(hid_t dataset, hid_t mem_type, uint64_t begin, uint64_t count, void* out) {
  if (count == 0) return;
  const hsize_t start = begin;
  const hsize_t size = count;
  Handle file_space(check(H5Dget_space(dataset), "get dataspace"));
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &size, nullptr),
        "select elements " + std::to_string(begin) + "+" + std::to_string(count));
  Handle mem_space(check(H5Screate_simple(1, &size, nullptr), "create memory dataspace"));
  check(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out),
        "read elements " + std::to_string(begin) + "+" + std::to_string(count));
}

void read_ranges(hid_t dataset, hid_t mem_type, const std::vector<Range>& ranges, void* out) {
  if (ranges.empty()) return;
  Handle file_space(check(H5Dget_space(dataset), "get dataspace"));
  hsize_t total = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const hsize_t start = ranges[i].begin;
    const hsize_t count = ranges[i].count;
    check(H5Sselect_hyperslab(file_space.get(), i == 0 ? H5S_SELECT_SET : H5S_SELECT_OR, &start,
                              nullptr, &count, nullptr),
          "select elements " + std::to_string(start) + "+" + std::to_string(count));
    total += count;
  }
  Handle mem_space(check(H5Screate_simple(1, &total, nullptr), "create memory dataspace"));
  check(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, out),
        "read " + std::to_string(ranges.size()) + " ranges");
}

void write_attribute(hid_t object, const std::string& name, const std::string& value) {
  Handle type = string_type(value.size() + 1);
  Handle space(check(H5Screate(H5S_SCALAR), "create scalar dataspace"));
  Handle attr(
      check(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
            "create attribute '" + name + "'"));
  check(H5Awrite(attr.get(), type.get(), value.c_str()), "write attribute '" + name + "'");
}

void write_attribute(hid_t object, const std::string& name, int64_t value) {
  Handle space(check(H5Screate(H5S_SCALAR), "create scalar dataspace"));
  Handle attr(
      check(H5Acreate2(object, name.c_str(), H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
            "create attribute '" + name + "'"));
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, &value), "write attribute '" + name + "'");
}

bool has_attribute(hid_t object, const std::string& name) {
  return H5Aexists(object, name.c_str()) > 0;
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  const std::string what = "read string attribute '" + name + "'";
  Handle attr(check(H5Aopen(object, name.c_str(), H5P_DEFAULT), what));
  Handle type(check(H5Aget_type(attr.get()), what));
  if (H5Tget_class(type.get()) != H5T_STRING) throw std::runtime_error("HDF5: cannot " + what);
  if (H5Tis_variable_str(type.get()) > 0) {  // as h5py writes them
    Handle mem_type = string_type(H5T_VARIABLE);
    char* text = nullptr;
    check(H5Aread(attr.get(), mem_type.get(), &text), what);
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  std::string buffer(H5Tget_size(type.get()), '\0');
  Handle mem_type = string_type(buffer.size());
  check(H5Aread(attr.get(), mem_type.get(), buffer.data()), what);
  return buffer.substr(0, buffer.find('\0'));
}

int64_t read_int_attribute(hid_t object, const std::string& name) {
  const std::string what = "read integer attribute '" + name + "'";
  Handle attr(check(H5Aopen(object, name.c_str(), H5P_DEFAULT), what));
  int64_t value = 0;
  check(H5Aread(attr.get(), H5T_NATIVE_INT64, &value), what);
  return value;
}

}  // namespace tandem::data::h5
