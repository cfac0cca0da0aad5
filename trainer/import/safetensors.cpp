#include "trainer/import/safetensors.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>
#include <vector>

namespace tandem::importer {
namespace {

// A header larger than this is not a model's (safetensors' own reader refuses beyond 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100 << 20;

const std::map<std::string, torch::ScalarType>& dtypes() {
  static const std::map<std::string, torch::ScalarType> table = {
      {"F64", torch::kFloat64}, {"F32", torch::kFloat32}, {"F16", torch::kFloat16},
      {"BF16", torch::kBFloat16}, {"I64", torch::kInt64}, {"I32", torch::kInt32},
      {"I16", torch::kInt16}, {"I8", torch::kInt8}, {"U8", torch::kUInt8}, {"BOOL", torch::kBool}};
  return table;
}

class Reader {
 public:
  explicit Reader(std::string path) : path_(std::move(path)), in_(path_, std::ios::binary) {
    if (!in_) throw bad("cannot open it");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
    in_.seekg(0);
  }

  std::invalid_argument bad(const std::string& what) const {
    return std::invalid_argument("'" + path_ + "': " + what);
  }

  std::string bytes(uint64_t at, uint64_t count) {
    std::string out(count, '\0');
    in_.seekg(static_cast<std::streamoff>(at));
    in_.read(out.data(), static_cast<std::streamsize>(count));
    if (!in_) throw bad("cannot read " + std::to_string(count) + " bytes at " + std::to_string(at));
    return out;
  }
  uint64_t size() const { return size_; }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

uint64_t little_endian_u64(const std::string& bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[i]);
  return value;
}

// One header entry's tensor: its dtype, shape and byte range checked, then its bytes read from the
// data that starts at `data_start`.
torch::Tensor read_tensor(Reader& file, const std::string& name, const nlohmann::json& entry,
                          uint64_t data_start) {
  const uint64_t data_size = file.size() - data_start;
  const auto where = [&](const std::string& what) {
    return file.bad("tensor '" + name + "': " + what);
  };
  if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
      !entry.contains("data_offsets")) {
    throw where("expected dtype, shape and data_offsets");
  }
  const auto& dtype = entry["dtype"];
  const auto found = dtype.is_string() ? dtypes().find(dtype.get<std::string>()) : dtypes().end();
  if (found == dtypes().end()) throw where("dtype " + dtype.dump() + " is not one Tandem reads");
  const auto& shape = entry["shape"];
  const auto& offsets = entry["data_offsets"];
  if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2 ||
      !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
    throw where("expected a shape list and two data_offsets");
  }
  std::vector<int64_t> sizes;
  uint64_t elements = 1;
  for (const auto& dim : shape) {
    if (!dim.is_number_unsigned() || dim.get<uint64_t>() > (uint64_t{1} << 40)) {
      throw where("shape " + shape.dump() + " is not a list of sizes");
    }
    sizes.push_back(dim.get<int64_t>());
    if (sizes.back() != 0 && elements > (uint64_t{1} << 40) / sizes.back()) {
      throw where("shape " + shape.dump() + " is too large");
    }
    elements *= sizes.back();
  }
  const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  const uint64_t expected = elements * torch::elementSize(found->second);
  if (begin > end || end > data_size || end - begin != expected) {
    throw where("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + ") for " +
                std::to_string(expected) + " bytes of shape " + shape.dump() + " in " +
                std::to_string(data_size) + " bytes of data");
  }
  auto tensor = torch::empty(sizes, torch::TensorOptions().dtype(found->second));
  const std::string bytes = file.bytes(data_start + begin, expected);
  // An empty tensor has no memory (data_ptr() is null), where memcpy may not even copy nothing.
  if (!bytes.empty()) std::memcpy(tensor.data_ptr(), bytes.data(), bytes.size());
  return tensor;
}

}  // namespace

std::map<std::string, torch::Tensor> read_safetensors(const std::string& path) {
  Reader file(path);
  if (file.size() < 8) {
    throw file.bad("not a safetensors file (shorter than its 8-byte header size)");
  }
  const uint64_t header_size = little_endian_u64(file.bytes(0, 8));
  if (header_size > kMaxHeaderBytes || header_size > file.size() - 8) {
    throw file.bad("not a safetensors file (header of " + std::to_string(header_size) +
                   " bytes in a file of " + std::to_string(file.size()) + ")");
  }
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(file.bytes(8, header_size));
  } catch (const nlohmann::json::exception& e) {
    throw file.bad(std::string("not a safetensors file (its header is not JSON: ") + e.what() +
                   ")");
  }
  if (!header.is_object()) throw file.bad("not a safetensors file (its header is not an object)");

  std::map<std::string, torch::Tensor> out;
  for (const auto& [name, entry] : header.items()) {
    if (name != "__metadata__") out.emplace(name, read_tensor(file, name, entry, 8 + header_size));
  }
  return out;
}

}  // namespace tandem::importer
