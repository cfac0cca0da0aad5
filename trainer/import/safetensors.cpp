#include "trainer/import/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace tandem::importer {
namespace {

// A header larger than this is not a model's (safetensors' own reader refuses beyond 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100 << 20;
// A dimension or element count beyond this is not a model's, and would overflow the byte count.
constexpr uint64_t kMaxElements = uint64_t{1} << 40;

const std::map<std::string, torch::ScalarType>& dtypes() {
  static const std::map<std::string, torch::ScalarType> table = {
      {"F64", torch::kFloat64},   {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64},   {"I32", torch::kInt32},
      {"I16", torch::kInt16},     {"I8", torch::kInt8},     {"U8", torch::kUInt8},
      {"BOOL", torch::kBool}};
  return table;
}

uint64_t little_endian_u64(const unsigned char* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | bytes[i];
  return value;
}

// One header entry checked: its dtype, its shape and its byte range in the `data_size` bytes of
// data that start at `data_start`.
SafetensorsFile::Entry parse_entry(const nlohmann::json& entry, uint64_t data_start,
                                   uint64_t data_size,
                                   const std::function<std::invalid_argument(std::string)>& bad) {
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    throw bad("expected dtype, shape and data_offsets");
  }
  const auto& dtype = entry["dtype"];
  const auto found = dtype.is_string() ? dtypes().find(dtype.get<std::string>()) : dtypes().end();
  if (found == dtypes().end()) throw bad("dtype " + dtype.dump() + " is not one Tandem reads");
  const auto& shape = entry["shape"];
  const auto& offsets = entry["data_offsets"];
  if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2 ||
      !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
    throw bad("expected a shape list and two data_offsets");
  }
  SafetensorsFile::Entry out{found->second, {}, 0};
  uint64_t elements = 1;
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > kMaxElements) {
      throw bad("shape " + shape.dump() + " is not a list of sizes");
    }
    out.shape.push_back(dim.get<int64_t>());
    if (out.shape.back() != 0 && elements > kMaxElements / out.shape.back()) {
      throw bad("shape " + shape.dump() + " is too large");
    }
    elements *= out.shape.back();
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  const uint64_t expected = elements * torch::elementSize(out.dtype);
  if (begin > end || end > data_size || end - begin != expected) {
    throw bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ") for " +
              std::to_string(expected) + " bytes of shape " + shape.dump() + " in " +
              std::to_string(data_size) + " bytes of data");
  }
  out.offset = data_start + begin;
  return out;
}

}  // namespace

SafetensorsFile::SafetensorsFile(std::string path) : path_(std::move(path)) {
  const auto bad = [&](const std::string& what) {
    return std::invalid_argument("'" + path_ + "': " + what);
  };
  fd_ = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw bad("cannot open it");
  const off_t end = ::lseek(fd_, 0, SEEK_END);
  if (end < 0) {
    ::close(fd_);
    throw bad("cannot open it");
  }
  size_ = static_cast<uint64_t>(end);
  try {
    if (size_ < 8) throw bad("not a safetensors file (shorter than its 8-byte header size)");
    unsigned char size_bytes[8];
    read_bytes(0, 8, size_bytes);
    const uint64_t header_size = little_endian_u64(size_bytes);
    if (header_size > kMaxHeaderBytes || header_size > size_ - 8) {
      throw bad("not a safetensors file (header of " + std::to_string(header_size) +
                " bytes in a file of " + std::to_string(size_) + ")");
    }
    std::string text(header_size, '\0');
    read_bytes(8, header_size, text.data());
    nlohmann::json header;
    try {
      header = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw bad(std::string("not a safetensors file (its header is not JSON: ") + e.what() + ")");
    }
    if (!header.is_object()) throw bad("not a safetensors file (its header is not an object)");
    const uint64_t data_start = 8 + header_size;
    for (const auto& [name, item] : header.items()) {
      if (name == "__metadata__") continue;
      const auto bad_tensor = [&](const std::string& what) {
        return bad("tensor '" + name + "': " + what);
      };
      entries_.emplace(name, parse_entry(item, data_start, size_ - data_start, bad_tensor));
    }
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::~SafetensorsFile() { ::close(fd_); }

const SafetensorsFile::Entry& SafetensorsFile::entry(const std::string& name) const {
  const auto it = entries_.find(name);
  if (it == entries_.end()) {
    throw std::invalid_argument("'" + path_ + "': no tensor '" + name + "'");
  }
  return it->second;
}

void SafetensorsFile::read_bytes(uint64_t at, uint64_t count, void* out) const {
  auto* bytes = static_cast<char*>(out);
  while (count > 0) {
    const ssize_t got = ::pread(fd_, bytes, count, static_cast<off_t>(at));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      throw std::invalid_argument("'" + path_ + "': cannot read " + std::to_string(count) +
                                  " bytes at " + std::to_string(at) +
                                  (got < 0 ? std::string(" (") + std::strerror(errno) + ")" : ""));
    }
    bytes += got;
    at += static_cast<uint64_t>(got);
    count -= static_cast<uint64_t>(got);
  }
}

torch::Tensor SafetensorsFile::read(const std::string& name) const {
  const Entry& e = entry(name);
  if (!e.shape.empty()) return read_rows(name, 0, e.shape[0]);
  auto scalar = torch::empty({}, torch::TensorOptions().dtype(e.dtype));  // 0-d: no rows
  read_bytes(e.offset, scalar.element_size(), scalar.data_ptr());
  return scalar;
}

torch::Tensor SafetensorsFile::read_rows(const std::string& name, int64_t begin,
                                         int64_t count) const {
  const Entry& e = entry(name);
  if (e.shape.empty() || begin < 0 || count < 0 || begin + count > e.shape[0]) {
    throw std::out_of_range("'" + path_ + "': rows [" + std::to_string(begin) + ", " +
                            std::to_string(begin + count) + ") of tensor '" + name + "'");
  }
  std::vector<int64_t> shape = e.shape;
  shape[0] = count;
  auto out = torch::empty(shape, torch::TensorOptions().dtype(e.dtype));
  const uint64_t row_bytes = static_cast<uint64_t>(out.numel() / std::max<int64_t>(count, 1)) *
                             static_cast<uint64_t>(out.element_size());
  // An empty tensor has no memory (data_ptr() is null): nothing to read.
  if (out.numel() > 0) {
    read_bytes(e.offset + static_cast<uint64_t>(begin) * row_bytes,
               static_cast<uint64_t>(count) * row_bytes, out.data_ptr());
  }
  return out;
}

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  const SafetensorsFile file(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, entry] : file.entries()) out.emplace(name, file.read(name));
  return out;
}

}  // namespace tandem::importer
