// HDF5 C API helpers for checkpoint/ (see hdf5_util.h).
#include "trainer/checkpoint/hdf5_util.h"

#include <cstring>
#include <fstream>
#include <stdexcept>
#include <utility>

namespace tandem::checkpoint::h5 {

Handle::Handle(Handle&& other) noexcept
    : id_(std::exchange(other.id_, H5I_INVALID_HID)), close_(other.close_) {}

Handle& Handle::operator=(Handle&& other) noexcept {
  if (this != &other) {
    close();
    id_ = std::exchange(other.id_, H5I_INVALID_HID);
    close_ = other.close_;
  }
  return *this;
}

bool Handle::close() {
  if (id_ < 0) return true;
  const herr_t status = close_(std::exchange(id_, H5I_INVALID_HID));
  return status >= 0;
}

QuietErrors::QuietErrors() {
  H5Eget_auto2(H5E_DEFAULT, &old_function_, &old_data_);
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
}

QuietErrors::~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, old_function_, old_data_); }

namespace {

// Walking downward visits the API call first and the root cause last; keep the last.
herr_t keep_description(unsigned, const H5E_error2_t* error, void* innermost) {
  if (error->desc != nullptr && error->desc[0] != '\0') {
    *static_cast<std::string*>(innermost) = error->desc;
  }
  return 0;
}

}  // namespace

std::string last_error() {
  std::string innermost;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, keep_description, &innermost);
  H5Eclear2(H5E_DEFAULT);
  return innermost.empty() ? "unknown HDF5 error" : innermost;
}

void check(int64_t status, const std::string& what) {
  if (status < 0) throw std::runtime_error(what + ": " + last_error());
}

Handle create_group(hid_t parent, const std::string& name) {
  Handle gcpl(H5Pcreate(H5P_GROUP_CREATE), H5Pclose);
  check(H5Pset_link_creation_order(gcpl.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
        "group " + name);
  Handle group(H5Gcreate2(parent, name.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), H5Gclose);
  check(group.get(), "cannot create group " + name);
  return group;
}

Handle open_group(hid_t parent, const std::string& name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) return {};
  Handle group(H5Gopen2(parent, name.c_str(), H5P_DEFAULT), H5Gclose);
  if (!group.valid()) H5Eclear2(H5E_DEFAULT);
  return group;
}

std::vector<std::string> link_names(hid_t group) {
  H5G_info_t info;
  check(H5Gget_info(group, &info), "cannot list group");
  Handle gcpl(H5Gget_create_plist(group), H5Pclose);
  unsigned order_flags = 0;
  H5Pget_link_creation_order(gcpl.get(), &order_flags);
  const H5_index_t index =
      (order_flags & H5P_CRT_ORDER_INDEXED) != 0 ? H5_INDEX_CRT_ORDER : H5_INDEX_NAME;
  std::vector<std::string> names;
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    const ssize_t size =
        H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, nullptr, 0, H5P_DEFAULT);
    check(size, "cannot read a link name");
    std::string name(static_cast<size_t>(size) + 1, '\0');
    check(H5Lget_name_by_idx(group, ".", index, H5_ITER_INC, i, name.data(), name.size(),
                             H5P_DEFAULT),
          "cannot read a link name");
    name.resize(static_cast<size_t>(size));
    names.push_back(std::move(name));
  }
  return names;
}

namespace {

herr_t collect_attribute_name(hid_t, const char* name, const H5A_info_t*, void* names) {
  static_cast<std::vector<std::string>*>(names)->push_back(name);
  return 0;
}

}  // namespace

std::vector<std::string> attribute_names(hid_t object) {
  std::vector<std::string> names;
  check(H5Aiterate2(object, H5_INDEX_NAME, H5_ITER_INC, nullptr, collect_attribute_name, &names),
        "cannot list attributes");
  return names;
}

namespace {

// A fixed-length, NUL-padded UTF-8 string type holding `size` bytes (at least 1: HDF5's minimum).
Handle string_type(size_t size) {
  Handle type(H5Tcopy(H5T_C_S1), H5Tclose);
  check(H5Tset_size(type.get(), size == 0 ? 1 : size), "string type");
  check(H5Tset_strpad(type.get(), H5T_STR_NULLPAD), "string type");
  check(H5Tset_cset(type.get(), H5T_CSET_UTF8), "string type");
  return type;
}

void write_scalar_attribute(hid_t object, const std::string& name, hid_t file_type,
                            hid_t memory_type, const void* value) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle attribute(
      H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT), H5Aclose);
  check(attribute.get(), "cannot create attribute " + name);
  check(H5Awrite(attribute.get(), memory_type, value), "cannot write attribute " + name);
}

// Opens attribute `name` when it exists and its type is of `type_class`.
Handle open_attribute(hid_t object, const std::string& name, H5T_class_t type_class) {
  if (H5Aexists(object, name.c_str()) <= 0) return {};
  Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), H5Aclose);
  if (!attribute.valid()) return {};
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  if (H5Tget_class(type.get()) != type_class) return {};
  return attribute;
}

// Reads a scalar string through `read(memory_type, buffer)` whether stored fixed-length or
// variable-length (files written by other tools use either).
template <class Read>
std::optional<std::string> read_string(hid_t file_type, Read read) {
  if (H5Tis_variable_str(file_type) > 0) {
    Handle memory(H5Tcopy(H5T_C_S1), H5Tclose);
    H5Tset_size(memory.get(), H5T_VARIABLE);
    char* text = nullptr;
    if (read(memory.get(), static_cast<void*>(&text)) < 0) return std::nullopt;
    std::string value = text != nullptr ? text : "";
    H5free_memory(text);
    return value;
  }
  const size_t size = H5Tget_size(file_type);
  std::string value(size, '\0');
  if (read(string_type(size).get(), static_cast<void*>(value.data())) < 0) return std::nullopt;
  value.erase(value.find_last_not_of('\0') + 1);  // NUL padding
  return value;
}

}  // namespace

void write_attribute(hid_t object, const std::string& name, int64_t value) {
  write_scalar_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

void write_attribute(hid_t object, const std::string& name, double value) {
  write_scalar_attribute(object, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &value);
}

void write_attribute(hid_t object, const std::string& name, const std::string& value) {
  Handle type = string_type(value.size());
  write_scalar_attribute(object, name, type.get(), type.get(), value.c_str());
}

std::optional<int64_t> read_int_attribute(hid_t object, const std::string& name) {
  Handle attribute = open_attribute(object, name, H5T_INTEGER);
  int64_t value = 0;
  if (!attribute.valid() || H5Aread(attribute.get(), H5T_NATIVE_INT64, &value) < 0)
    return std::nullopt;
  return value;
}

std::optional<double> read_double_attribute(hid_t object, const std::string& name) {
  Handle attribute = open_attribute(object, name, H5T_FLOAT);
  double value = 0;
  if (!attribute.valid() || H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0)
    return std::nullopt;
  return value;
}

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name) {
  Handle attribute = open_attribute(object, name, H5T_STRING);
  if (!attribute.valid()) return std::nullopt;
  Handle type(H5Aget_type(attribute.get()), H5Tclose);
  return read_string(type.get(), [&](hid_t memory, void* buffer) {
    return H5Aread(attribute.get(), memory, buffer);
  });
}

void write_string_dataset(hid_t parent, const std::string& name, const std::string& value) {
  constexpr size_t kCompactLimit = 32 * 1024;  // compact data must fit a 64 KiB header message
  Handle type = string_type(value.size());
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE), H5Pclose);
  if (value.size() <= kCompactLimit) check(H5Pset_layout(dcpl.get(), H5D_COMPACT), name);
  Handle dataset(H5Dcreate2(parent, name.c_str(), type.get(), space.get(), H5P_DEFAULT, dcpl.get(),
                            H5P_DEFAULT),
                 H5Dclose);
  check(dataset.get(), "cannot create dataset " + name);
  check(H5Dwrite(dataset.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, value.c_str()),
        "cannot write dataset " + name);
}

std::optional<std::string> read_string_dataset(hid_t parent, const std::string& name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) return std::nullopt;
  Handle dataset(H5Dopen2(parent, name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!dataset.valid()) return std::nullopt;
  Handle type(H5Dget_type(dataset.get()), H5Tclose);
  if (H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  return read_string(type.get(), [&](hid_t memory, void* buffer) {
    return H5Dread(dataset.get(), memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer);
  });
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

}  // namespace tandem::checkpoint::h5
