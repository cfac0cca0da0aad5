#include "trainer/export/safetensors_writer.h"

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

namespace tandem::exporter {

void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors) {
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    if (tensor.scalar_type() != torch::kFloat) {
      throw std::invalid_argument("safetensors: tensor '" + name + "' is not float32");
    }
    if (!names.insert(name).second) {
      throw std::invalid_argument("safetensors: tensor '" + name + "' given twice");
    }
    const auto bytes = static_cast<uint64_t>(tensor.numel()) * sizeof(float);
    header[name] = {{"dtype", "F32"}, {"shape", tensor.sizes().vec()},
                    {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary);
  const uint64_t length = text.size();
  unsigned char prefix[8];
  for (int k = 0; k < 8; ++k) prefix[k] = static_cast<unsigned char>(length >> (8 * k));
  out.write(reinterpret_cast<const char*>(prefix), sizeof prefix);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  for (const auto& [name, tensor] : tensors) {
    const auto data = tensor.to(torch::kCPU).contiguous();
    out.write(reinterpret_cast<const char*>(data.data_ptr<float>()),
              static_cast<std::streamsize>(data.numel() * sizeof(float)));
  }
  out.close();
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace tandem::exporter
