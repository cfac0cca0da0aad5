// Small helpers over the HDF5 C API for corpus files (data/) and checkpoints (checkpoint/): owning
// handles, quiet error stacks, groups, 1-D numeric datasets, scalar attributes and strings.
// Library tandem_hdf5, apart from tandem_common so that only its users link HDF5.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace tandem::h5 {

// Owns one HDF5 identifier and closes it with the matching H5?close (H5Iget_type picks it).
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& other) noexcept;
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { close(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  // Closes now; negative on failure (a file's close writes its last metadata, so check it).
  herr_t close();

 private:
  hid_t id_ = H5I_INVALID_HID;
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

// Returns `status` (an hid_t, herr_t or size); throws std::runtime_error("<what>: <last_error()>")
// when it is negative.
hid_t check(hid_t status, const std::string& what);

// Whether `path` holds the HDF5 signature where HDF5 looks for it (false when unreadable).
bool is_hdf5(const std::string& path);

// ---- groups

// The order in which link_names() lists a group's links. kCreation costs an index per group.
enum class LinkOrder { kByName, kCreation };

// A new group without modification times, so equal inputs give a byte-identical file.
Handle create_group(hid_t parent, const std::string& name, LinkOrder order = LinkOrder::kByName);
Handle open_group(hid_t parent, const std::string& name);  // invalid Handle when absent
// Names of the links in `group`, in creation order when tracked, else by name.
std::vector<std::string> link_names(hid_t group);

// ---- scalar attributes: strings are fixed-length, NUL-terminated UTF-8

// Writers throw std::runtime_error naming the attribute.
void write_attribute(hid_t object, const std::string& name, int64_t value);
void write_attribute(hid_t object, const std::string& name, double value);
void write_attribute(hid_t object, const std::string& name, const std::string& value);
// Readers return nothing when the attribute is absent, of another type class, not one value (a
// list, or none) or unreadable.
std::optional<int64_t> read_int_attribute(hid_t object, const std::string& name);
std::optional<double> read_double_attribute(hid_t object, const std::string& name);
std::optional<std::string> read_string_attribute(hid_t object, const std::string& name);
std::vector<std::string> attribute_names(hid_t object);

// ---- datasets

// A scalar string dataset; small ones are stored in the object header (compact layout), where
// the v2 header checksum covers them.
void write_string_dataset(hid_t parent, const std::string& name, const std::string& value);
// Nothing when absent, not a string, not one value, short of its bytes (storage_problem) or
// unreadable.
std::optional<std::string> read_string_dataset(hid_t parent, const std::string& name);

// How a 1-D dataset is stored. Compressed: chunked, deflate + Fletcher32 checksum, for data read
// whole. Contiguous: for data read a few elements at a time at random places, where decompressing
// a chunk per read would dominate (measured ~4x slower per sentence even with 4 KiB chunks).
enum class Layout { kCompressed, kContiguous };

// A 1-D dataset of `count` elements of `mem_type` (H5T_NATIVE_INT32, _INT64, _UINT8), stored as
// the little-endian type `file_type`, without modification times.
void write_dataset(hid_t parent, const std::string& name, hid_t mem_type, hid_t file_type,
                   const void* data, uint64_t count, Layout layout);
void write_vector(hid_t parent, const std::string& name, const std::vector<int32_t>& values,
                  Layout layout);
void write_vector(hid_t parent, const std::string& name, const std::vector<int64_t>& values,
                  Layout layout);
void write_bytes(hid_t parent, const std::string& name, const std::string& bytes);  // uint8
// The same dataset created empty, for data written a block at a time with write_range (data
// too large to hold in memory): the file is the same as write_dataset's for the same content.
Handle create_dataset(hid_t parent, const std::string& name, hid_t file_type, uint64_t count,
                      Layout layout);
// Writes elements [begin, begin + count) of a 1-D dataset from `data` (count elements of mem_type).
void write_range(hid_t dataset, hid_t mem_type, uint64_t begin, uint64_t count, const void* data);

// Deflate expands data at most 1032-fold: a dataset declaring more than this many times the bytes
// it stores in the file is damaged or crafted (a few bytes can declare a 2^40-element dataset of
// chunks never written, which a reader would allocate). Readers that allocate by a dataset's
// declared size check it first.
inline constexpr long double kMaxExpansion = 1100;
// "" when the dataset stores enough bytes for its declared size (kMaxExpansion), else the problem.
std::string storage_problem(hid_t dataset);

// Throws unless the dataset is 1-D and passes storage_problem.
uint64_t dataset_length(hid_t dataset);
// Reads elements [begin, begin + count) of a 1-D dataset into `out` (count elements of mem_type).
void read_range(hid_t dataset, hid_t mem_type, uint64_t begin, uint64_t count, void* out);

struct Range {
  uint64_t begin = 0;
  uint64_t count = 0;
};
// Reads several disjoint, non-empty ranges, sorted by `begin`, with an H5Dread per 32 of them:
// `out` receives them back to back in that order (sum of counts elements).
void read_ranges(hid_t dataset, hid_t mem_type, const std::vector<Range>& ranges, void* out);

}  // namespace tandem::h5
