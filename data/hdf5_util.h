// Small HDF5 C API helpers shared by the corpus writer (prep.cpp) and reader (corpus.cpp):
// owning handles, scoped silencing of HDF5's error printing, 1-D datasets and scalar attributes.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tandem::data::h5 {

// Owns an hid_t and closes it with the matching H5*close (H5Iget_type picks it).
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  Handle(Handle&& other) noexcept : id_(other.release()) {}
  Handle& operator=(Handle&& other) noexcept;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  hid_t release();
  void reset();

 private:
  hid_t id_ = -1;
};

// While alive, HDF5 prints no error stacks: callers turn failures into one-line exceptions.
class QuietErrors {
 public:
  QuietErrors();
  ~QuietErrors();
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t saved_func_ = nullptr;
  void* saved_data_ = nullptr;
};

// Throws std::runtime_error("HDF5: <what>") when `status` (an hid_t or herr_t) is negative.
hid_t check(hid_t status, const std::string& what);

Handle create_group(hid_t parent, const std::string& name);

// How a dataset is stored. Compressed: chunked, deflate + Fletcher32 checksum, for data read
// whole. Contiguous: for data read a few elements at a time at random places, where decompressing
// a chunk per read would dominate (measured ~4x slower per sentence even with 4 KiB chunks).
enum class Layout { kCompressed, kContiguous };

// A 1-D dataset of `count` elements of `mem_type` (H5T_NATIVE_INT32, _INT64, _UINT8), stored as
// the little-endian type `file_type`.
void write_dataset(hid_t parent, const std::string& name, hid_t mem_type, hid_t file_type,
                   const void* data, uint64_t count, Layout layout);

void write_vector(hid_t parent, const std::string& name, const std::vector<int32_t>& values,
                  Layout layout);
void write_vector(hid_t parent, const std::string& name, const std::vector<int64_t>& values,
                  Layout layout);
void write_bytes(hid_t parent, const std::string& name, const std::string& bytes);  // uint8

uint64_t dataset_length(hid_t dataset);
// Reads elements [begin, begin + count) of a 1-D dataset into `out` (count elements of mem_type).
void read_range(hid_t dataset, hid_t mem_type, uint64_t begin, uint64_t count, void* out);

struct Range {
  uint64_t begin = 0;
  uint64_t count = 0;
};
// Reads several disjoint, non-empty ranges, sorted by `begin`, with one H5Dread: `out` receives
// them back to back in that order (sum of counts elements).
void read_ranges(hid_t dataset, hid_t mem_type, const std::vector<Range>& ranges, void* out);

void write_attribute(hid_t object, const std::string& name, const std::string& value);
void write_attribute(hid_t object, const std::string& name, int64_t value);
bool has_attribute(hid_t object, const std::string& name);
std::string read_string_attribute(hid_t object, const std::string& name);
int64_t read_int_attribute(hid_t object, const std::string& name);

}  // namespace tandem::data::h5
