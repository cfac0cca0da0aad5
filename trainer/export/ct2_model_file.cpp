#include "trainer/export/ct2_model_file.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <stdexcept>

namespace tandem::exporter {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "model.bin's integers and tensors are little-endian, as written here from memory");

constexpr uint32_t kBinaryVersion = 6;

// The DataType enum of CTranslate2's include/ctranslate2/types.h.
uint8_t type_id(const std::string& name, torch::ScalarType type) {
  switch (type) {
    case torch::kFloat: return 0;
    case torch::kInt8: return 1;
    case torch::kInt16: return 2;
    case torch::kInt32: return 3;
    case torch::kHalf: return 4;
    case torch::kBFloat16: return 5;
    default:
      throw std::invalid_argument("CTranslate2 variable '" + name + "' has dtype " +
                                  std::string(c10::toString(type)) +
                                  ", which model.bin cannot hold");
  }
}

uint32_t checked_u32(const std::string& name, const char* what, int64_t value) {
  if (value < 0 || value > std::numeric_limits<uint32_t>::max()) {
    throw std::invalid_argument("CTranslate2 variable '" + name + "': its " + what + " (" +
                                std::to_string(value) + ") does not fit model.bin's 32 bits");
  }
  return static_cast<uint32_t>(value);
}

class Writer {
 public:
  explicit Writer(const std::string& path) : path_(path), out_(path, std::ios::binary) {
    if (!out_) throw std::runtime_error("cannot write '" + path + "': " + std::strerror(errno));
  }
  template <class T>
  void put(T value) {
    out_.write(reinterpret_cast<const char*>(&value), sizeof value);
  }
  // uint16 length including the terminating NUL, the bytes, the NUL.
  void put_string(const std::string& text) {
    if (text.size() + 1 > std::numeric_limits<uint16_t>::max()) {
      throw std::invalid_argument("CTranslate2 name too long for model.bin: " + text.substr(0, 80));
    }
    put(static_cast<uint16_t>(text.size() + 1));
    out_.write(text.data(), static_cast<std::streamsize>(text.size()));
    put(static_cast<uint8_t>(0));
  }
  void put_variable(const Ct2Variable& v) {
    const torch::Tensor value = v.value.cpu().contiguous();
    if (value.dim() > std::numeric_limits<uint8_t>::max()) {
      throw std::invalid_argument("CTranslate2 variable '" + v.name + "' has too many dimensions");
    }
    put_string(v.name);
    put(static_cast<uint8_t>(value.dim()));
    for (const int64_t size : value.sizes()) put(checked_u32(v.name, "dimension", size));
    put(type_id(v.name, value.scalar_type()));
    const int64_t bytes = value.numel() * static_cast<int64_t>(value.element_size());
    put(checked_u32(v.name, "size in bytes", bytes));
    out_.write(static_cast<const char*>(value.data_ptr()), static_cast<std::streamsize>(bytes));
  }
  void close() {
    out_.close();
    if (!out_) throw std::runtime_error("writing '" + path_ + "' failed: " + std::strerror(errno));
  }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace

void write_ct2_model(const std::string& path, const Ct2Model& model) {
  std::vector<const Ct2Variable*> variables;
  for (const auto& v : model.variables) variables.push_back(&v);
  std::sort(variables.begin(), variables.end(),
            [](const Ct2Variable* a, const Ct2Variable* b) { return a->name < b->name; });
  Writer out(path);
  out.put(kBinaryVersion);
  out.put_string(model.spec);
  out.put(model.revision);
  out.put(checked_u32(path, "variable count", static_cast<int64_t>(variables.size())));
  for (const Ct2Variable* v : variables) out.put_variable(*v);
  out.put(checked_u32(path, "alias count", static_cast<int64_t>(model.aliases.size())));
  for (const auto& alias : model.aliases) {
    out.put_string(alias.alias);
    out.put_string(alias.target);
  }
  out.close();
}

}  // namespace tandem::exporter
