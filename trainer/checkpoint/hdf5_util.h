// Small RAII and typed helpers over the HDF5 C API for checkpoint/: owned identifiers, quiet error
// stacks, scalar and string attributes, string datasets and link listing. No Tandem specifics here.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::checkpoint::h5 {

// Owns one HDF5 identifier and closes it with the matching H5?close on destruction.
class Handle {
 public:
  Handle() = default;
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { close(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now and reports failure (a file's close writes its last metadata).
  bool close();

 private:
  hid_t id_ = H5I_INVALID_HID;
  herr_t (*close_)(hid_t) = nullptr;
};

// Turns HDF5's automatic error printing off while alive, so failures surface only as our
// one-line exceptions; restores the previous handler afterwards.
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t old_function_ = nullptr;
  void* old_data_ = nullptr;
};

// The innermost message on HDF5's error stack (e.g. "data error detected by Fletcher32
// checksum"), or "unknown HDF5 error"; clears the stack.
std::string last_error();

// Throws std::runtime_error("<what>: <last_error()>") when `status` is negative.
void check(int64_t status, const std::string& what);

// A group whose links list in creation order (so tensors read back in the order written).
Handle create_group(hid_t parent, const std::string& name);
Handle open_group(hid_t parent, const std::string& name);  // invalid Handle when absent
// Names of the links in `group`, in creation order when tracked, else by name.
std::vector<std::string> link_names(hid_t group);
std::vector<std::string> attribute_names(hid_t object);

// Writers throw std::runtime_error naming the attribute or dataset.
void write_attribute(hid_t object, const std::string& name, int64_t value);
void write_attribute(hid_t object, const std::string& name, double value);
void write_attribute(hid_t object, const std::string& name, const std::string& value);
// Readers return nothing when the attribute is absent, of another type or unreadable.
std::optional<int64_t> read_int_attribute(hid_t object, const std::string& name);
std::optional<double> read_double_attribute(hid_t object, const std::string& name);
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name);

// A scalar fixed-length UTF-8 string dataset; small ones are stored in the object header
// (compact layout), where the v2 header checksum covers them.
void write_string_dataset(hid_t parent, const std::string& name, const std::string& value);
std::optional<std::string> read_string_dataset(hid_t parent, const std::string& name);

// Whether `path` holds the HDF5 signature where HDF5 looks for it (false when unreadable).
bool is_hdf5(const std::string& path);

}  // namespace tandem::checkpoint::h5
