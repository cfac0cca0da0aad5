// HDF5 C API helpers (see hdf5.h).
#include "trainer/hdf5/hdf5.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace tandem::h5 {
namespace {

// HDF5 closes what is still open when the process exits. A file whose write failed (a full disk)
// stays open in the library in a half-closed state, and closing it again at exit crashed
// (HDF5 1.10, seen as a segfault after the error was reported). Every file Tandem opens is
// closed by its Handle, so the exit-time pass has nothing to do but that: it is turned off,
// before any other HDF5 call (static initialisation of this library).
const bool kNoCloseAtExit = [] {
  H5dont_atexit();
  return true;
}();

// Compressed datasets are read whole, so chunks are large: 64 Ki elements.
constexpr hsize_t kChunkElements = 1 << 16;
constexpr unsigned kDeflateLevel = 4;
constexpr size_t kCompactLimit = 32 * 1024;  // compact data must fit a 64 KiB header message

// Walking downward visits the API call first and the root cause last; keep the last.
herr_t keep_description(unsigned, const H5E_error2_t* error, void* innermost) {
  if (error->desc != nullptr && error->desc[0] != '\0') {
    *static_cast<std::string*>(innermost) = error->desc;
  }
  return 0;
}

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

// A NUL-terminated string type of `size` bytes, the terminator included (or H5T_VARIABLE).
Handle string_type(size_t size, H5T_cset_t charset = H5T_CSET_UTF8) {
  Handle type(check(H5Tcopy(H5T_C_S1), "cannot copy the string type"));
  check(H5Tset_size(type.get(), size), "cannot set the string size");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLTERM), "cannot set the string padding");
  check(H5Tset_cset(type.get(), charset), "cannot set the string charset");
  return type;
}

// Property lists for new objects without modification times: same inputs, same bytes.
Handle untimed_creation(hid_t plist_class, const std::string& what) {
  Handle plist(check(H5Pcreate(plist_class), "cannot create the property list of " + what));
  check(H5Pset_obj_track_times(plist.get(), 0), "cannot turn off time tracking for " + what);
  return plist;
}

Handle dataset_creation(const std::string& name, uint64_t count, Layout layout) {
  Handle plist = untimed_creation(H5P_DATASET_CREATE, "dataset " + name);
  // Chunked layouts need a non-empty extent: an empty dataset stays contiguous.
  if (layout == Layout::kContiguous || count == 0) return plist;
  const hsize_t chunk = std::min<hsize_t>(count, kChunkElements);
  const std::string what = "cannot set the filters of dataset " + name;
  check(H5Pset_chunk(plist.get(), 1, &chunk), what);
  // Byte shuffle first: token ids are small, so their high bytes compress to nothing.
  check(H5Pset_shuffle(plist.get()), what);
  check(H5Pset_deflate(plist.get(), kDeflateLevel), what);
  check(H5Pset_fletcher32(plist.get()), what);
  return plist;
}

void write_scalar_attribute(hid_t object, const std::string& name, hid_t file_type,
                            hid_t memory_type, const void* value) {
  Handle space(check(H5Screate(H5S_SCALAR), "cannot create a scalar dataspace"));
  Handle attribute(
      check(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
            "cannot create attribute " + name));
  check(H5Awrite(attribute.get(), memory_type, value), "cannot write attribute " + name);
}

// Whether a dataspace holds one element (scalar, or simple of one): what the readers of one value
// read into one value's memory. (A file can hold a list where Tandem writes one value: reading it
// whole into one would write past that value, found by tests/fuzz/corpus_fuzz.cpp.)
bool holds_one(hid_t space) { return space >= 0 && H5Sget_simple_extent_npoints(space) == 1; }

// The attribute `name` of `object` when it is one value of class `type_class`; else invalid.
Handle open_attribute(hid_t object, const std::string& name, H5T_class_t type_class) {
  if (H5Aexists(object, name.c_str()) <= 0) return {};
  Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT));
  if (!attribute.valid()) return {};
  Handle type(H5Aget_type(attribute.get()));
  if (H5Tget_class(type.get()) != type_class) return {};
  Handle space(H5Aget_space(attribute.get()));
  if (!holds_one(space.get())) return {};
  return attribute;
}

// Reads a scalar string through `read(memory_type, buffer)` whether stored fixed-length (NUL
// terminated or padded) or variable-length, ASCII or UTF-8: files written by other tools use any
// of them, and HDF5 converts between neither variable and fixed length nor character sets.
template <class Read>
std::optional<std::string> read_string(hid_t file_type, Read read) {
  const H5T_cset_t charset = H5Tget_cset(file_type);
  if (charset < 0) return std::nullopt;
  if (H5Tis_variable_str(file_type) > 0) {
    char* text = nullptr;
    if (read(string_type(H5T_VARIABLE, charset).get(), static_cast<void*>(&text)) < 0) {
      return std::nullopt;
    }
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  // One byte more than stored: a padded string may fill all of it and still needs a terminator.
  std::string value(H5Tget_size(file_type) + 1, '\0');
  if (read(string_type(value.size(), charset).get(), static_cast<void*>(value.data())) < 0) {
    return std::nullopt;
  }
  value.resize(std::strlen(value.c_str()));
  return value;
}

}  // namespace

Handle::Handle(Handle&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    close();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
  }
  return *this;
}

herr_t Handle::close() {
  if (id_ < 0) return 0;
  const hid_t id = std::exchange(id_, H5I_INVALID_HID);
  switch (H5Iget_type(id)) {
    case H5I_FILE:
      return H5Fclose(id);
    case H5I_GROUP:
      return H5Gclose(id);
    case H5I_DATASET:
      return H5Dclose(id);
    case H5I_DATASPACE:
      return H5Sclose(id);
    case H5I_DATATYPE:
      return H5Tclose(id);
    case H5I_ATTR:
      return H5Aclose(id);
    case H5I_GENPROP_LST:
      return H5Pclose(id);
    default:
      return -1;
  }
}

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &old_function_, &old_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, old_function_, old_data_); }

std::string last_error() {
  std::string innermost;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_description, &innermost);
  H5Eclear2(H5E_DEFAULT);
  return innermost.empty() ? "unknown HDF5 error" : innermost;
}

hid_t check(hid_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error(what + ": " + last_error());
  return status;
}

// HDF5's own rule: the signature sits at byte 0, 512, 1024, 2048, ... (a user block may precede
// it). Checked by hand rather than with H5Fis_hdf5/H5Fis_accessible, which in newer versions
// open the whole file and would call a truncated checkpoint "not HDF5".
bool is_hdf5(const std::string& path) {
  static const char kSignature[8] = {'\211', 'H', 'D', 'F', '\r', '\n', '\032', '\n'};
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  if (!file) return false;
  const std::streamoff size = file.tellg();
  for (std::streamoff offset = 0; offset + 8 <= size; offset = offset == 0 ? 512 : offset * 2) {
    char bytes[8];
    file.seekg(offset);
    if (!file.read(bytes, sizeof bytes)) return false;
    if (std::memcmp(bytes, kSignature, sizeof bytes) == 0) return true;
  }
  return false;
}

// ---- groups

Handle create_group(hid_t parent, const std::string& name, LinkOrder order) {
  Handle gcpl = untimed_creation(H5P_GROUP_CREATE, "group " + name);
  if (order == LinkOrder::kCreation) {
    check(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
          "cannot track the creation order of group " + name);
  }
  return Handle(check(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT),
                      "cannot create group " + name));
}

Handle open_group(hid_t parent, const std::string& name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) return {};
  Handle group(H5Gopen2(parent, name.c_str(), H5P_DEFAULT));
  if (!group.valid()) H5Eclear2(H5E_DEFAULT);
  return group;
}

std::vector<std::string> link_names(hid_t group) {
  H5G_info_t info;
  check(H5Gget_info(group, &info), "cannot list group");
  Handle gcpl(H5Gget_create_plist(group));
  unsigned order_flags = 0;
  H5Pget_link_creation_order(gcpl.get(), &order_flags);
  const H5_index_t index =
      (order_flags & H5P_CRT_ORDER_INDEXED) != 0 ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const hid_t size =
        check(H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT),
              "cannot read a link name");
    std::string name(static_cast<size_t>(size) + 1, '\0');
    check(H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, name.data(), name.size(),
                             H5P_DEFAULT),
          "cannot read a link name");
    name.resize(static_cast<size_t>(size));
    names.push_back(std::move(name));
  }
  return names;
}

// ---- attributes

void write_attribute(hid_t object, const std::string& name, int64_t value) {
  write_scalar_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_attribute(hid_t object, const std::string& name, double value) {
  write_scalar_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void write_attribute(hid_t object, const std::string& name, const std::string& value) {
  Handle type = string_type(value.size() + 1);
  write_scalar_attribute(object, name, type.get(), type.get(), value.c_str());
}

std::optional<int64_t> read_int_attribute(hid_t object, const std::string& name) {
  Handle attribute = open_attribute(object, name, H5T_INTEGER);
  int64_t value = 0;
  if (!attribute.valid() || H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> read_double_attribute(hid_t object, const std::string& name) {
  Handle attribute = open_attribute(object, name, H5T_FLOAT);
  double value = 0;
  if (!attribute.valid() || H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0) {
    return std::nullopt;
  }
  return value;
}

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name) {
  Handle attribute = open_attribute(object, name, H5T_STRING);
  if (!attribute.valid()) return std::nullopt;
  Handle type(H5Aget_type(attribute.get()));
  return read_string(type.get(), [&](hid_t memory, void* buffer) {
    return H5Aread(attribute.get(), memory, buffer);
  });
}

std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  check(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute_name, &names),
        "cannot list attributes");
  return names;
}

// ---- datasets

void write_string_dataset(hid_t parent, const std::string& name, const std::string& value) {
  Handle type = string_type(value.size() + 1);
  Handle space(check(H5Screate(H5S_SCALAR), "cannot create a scalar dataspace"));
  Handle dcpl(check(H5Pcreate(H5P_DATASET_CREATE), "cannot create dataset " + name));
  if (value.size() <= kCompactLimit) check(H5Pset_layout(dcpl.get(), H5D_COMPACT), name);
  Handle dataset(check(H5Dcreate2(parent, name.c_str(), type.get(), space.get(), H5P_DEFAULT,
                                  dcpl.get(), H5P_DEFAULT),
                       "cannot create dataset " + name));
  check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.c_str()),
        "cannot write dataset " + name);
}

std::optional<std::string> read_string_dataset(hid_t parent, const std::string& name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) return std::nullopt;
  Handle dataset(H5Dopen2(parent, name.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) return std::nullopt;
  Handle type(H5Dget_type(dataset.get()));
  if (H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  Handle space(H5Dget_space(dataset.get()));
  if (!holds_one(space.get()) || !storage_problem(dataset.get()).empty()) return std::nullopt;
  return read_string(type.get(), [&](hid_t memory, void* buffer) {
    return H5Dread(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
  });
}

Handle create_dataset(hid_t parent, const std::string& name, hid_t file_type, uint64_t count,
                      Layout layout) {
  const hsize_t dims = count;
  Handle space(check(H5Screate_simple(1, &dims, nullptr), "cannot create dataspace for " + name));
  Handle plist = dataset_creation(name, count, layout);
  return Handle(check(H5Dcreate2(parent, name.c_str(), file_type, space.get(), H5P_DEFAULT,
                                 plist.get(), H5P_DEFAULT),
                      "cannot create dataset " + name));
}

namespace {

// The file and memory dataspaces of elements [begin, begin + count) of a 1-D dataset.
struct RangeSpaces {
  Handle file;
  Handle memory;
};

RangeSpaces select_range(hid_t dataset, uint64_t begin, uint64_t count, const std::string& what) {
  const hsize_t start = begin;
  const hsize_t size = count;
  Handle file_space(check(H5Dget_space(dataset), what));
  check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &start, nullptr, &size, nullptr),
        what);
  Handle memory_space(check(H5Screate_simple(1, &size, nullptr), what));
  return {std::move(file_space), std::move(memory_space)};
}

std::string range_text(uint64_t begin, uint64_t count) {
  return std::to_string(begin) + "+" + std::to_string(count);
}

}  // namespace

void write_range(hid_t dataset, hid_t mem_type, uint64_t begin, uint64_t count, const void* data) {
  if (count == 0) return;
  const std::string what = "cannot write elements " + range_text(begin, count);
  const RangeSpaces spaces = select_range(dataset, begin, count, what);
  check(H5Dwrite(dataset, mem_type, spaces.memory.get(), spaces.file.get(), H5P_DEFAULT, data),
        what);
}

void write_dataset(hid_t parent, const std::string& name, hid_t mem_type, hid_t file_type,
                   const void* data, uint64_t count, Layout layout) {
  Handle dataset = create_dataset(parent, name, file_type, count, layout);
  if (count == 0) return;
  check(H5Dwrite(dataset.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data),
        "cannot write dataset " + name);
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

std::string storage_problem(hid_t dataset) {
  Handle space(H5Dget_space(dataset));
  Handle type(H5Dget_type(dataset));
  const hssize_t elements = H5Sget_simple_extent_npoints(space.get());
  const size_t element_size = H5Tget_size(type.get());
  if (elements < 0 || element_size == 0) return "its shape or type cannot be read";
  // In long double: 2^64 elements of 2^32 bytes would overflow any integer type.
  const long double declared = static_cast<long double>(elements) * element_size;
  const long double stored = H5Dget_storage_size(dataset);
  if (declared <= kMaxExpansion * stored) return "";
  char text[160];
  std::snprintf(text, sizeof text,
                "it declares %.0Lf bytes of data but the file stores %.0Lf (damaged or crafted)",
                declared, stored);
  return text;
}

uint64_t dataset_length(hid_t dataset) {
  Handle space(check(H5Dget_space(dataset), "cannot get a dataspace"));
  if (H5Sget_simple_extent_ndims(space.get()) != 1) {
    throw std::runtime_error("HDF5: expected a 1-D dataset");
  }
  if (const std::string problem = storage_problem(dataset); !problem.empty()) {
    throw std::runtime_error("HDF5: " + problem);
  }
  hsize_t dims = 0;
  check(H5Sget_simple_extent_dims(space.get(), &dims, nullptr), "cannot get a dataset extent");
  return dims;
}

void read_range(hid_t dataset, hid_t mem_type, uint64_t begin, uint64_t count, void* out) {
  if (count == 0) return;
  const std::string what = "cannot read elements " + range_text(begin, count);
  const RangeSpaces spaces = select_range(dataset, begin, count, what);
  check(H5Dread(dataset, mem_type, spaces.memory.get(), spaces.file.get(), H5P_DEFAULT, out), what);
}

// HDF5 (1.10) joins each OR'ed hyperslab into the selection in time that grows with the blocks
// already in it, so one selection of a batch's ranges took time quadratic in its sentences: 90 ms
// to read a 65,536-token batch of the Bible corpus against 28 ms for 32,768, more than a GPU's
// step. Groups of this many ranges a read keep it linear; 32 measured fastest (5.3M target tokens
// a second at both sizes, tandem-bench-data; one read per range ran 3.7M).
constexpr size_t kRangesPerRead = 32;

void read_ranges(hid_t dataset, hid_t mem_type, const std::vector<Range>& ranges, void* out) {
  const std::string what = "cannot read " + std::to_string(ranges.size()) + " ranges";
  const size_t element = H5Tget_size(mem_type);
  auto* at = static_cast<char*>(out);
  for (size_t first = 0; first < ranges.size(); first += kRangesPerRead) {
    const size_t end = std::min(ranges.size(), first + kRangesPerRead);
    Handle file_space(check(H5Dget_space(dataset), what));
    hsize_t total = 0;
    for (size_t i = first; i < end; ++i) {
      const hsize_t start = ranges[i].begin;
      const hsize_t count = ranges[i].count;
      check(H5Sselect_hyperslab(file_space.get(), i == first ? H5S_SELECT_SET : H5S_SELECT_OR,
                                &start, nullptr, &count, nullptr),
            what);
      total += count;
    }
    Handle mem_space(check(H5Screate_simple(1, &total, nullptr), what));
    check(H5Dread(dataset, mem_type, mem_space.get(), file_space.get(), H5P_DEFAULT, at), what);
    at += total * element;
  }
}

}  // namespace tandem::h5
