// The safetensors reader (tandem-import's model.safetensors): the file's bytes as they come. What
// reads must be tensors whose bytes lie inside the file.
#include <cstring>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_files.h"
#include "tests/fuzz/fuzz_target.h"
#include "trainer/import/safetensors.h"

namespace tandem::fuzz {
namespace {

// A file as Hugging Face writes one: the header's length (8 bytes, little-endian), the JSON header,
// the data.
std::string safetensors_file(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t length = header.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return out + header + data;
}

}  // namespace

std::vector<std::string> seeds() {
  std::string floats(24, '\0');
  const float values[6] = {1, -2, 0.5f, 3, 4, 5};
  std::memcpy(floats.data(), values, sizeof(values));
  return {
      safetensors_file(R"({"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})", floats),
      safetensors_file(
          R"({"__metadata__":{"format":"pt"},"b":{"dtype":"BF16","shape":[2],)"
          R"("data_offsets":[0,4]},"i":{"dtype":"I64","shape":[],"data_offsets":[4,12]}})",
          std::string(12, '\x01')),
  };
}

}  // namespace tandem::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tandem;
  const std::string path = fuzz::write_scratch(
      "model.safetensors", std::string(reinterpret_cast<const char*>(data), size));
  fuzz::refused_or_read([&] {
    size_t bytes = 0;
    for (const auto& [name, tensor] : importer::read_safetensors(path)) {
      bytes += tensor.numel() * tensor.element_size();
      if (tensor.numel() > 0) tensor.sum();  // every byte readable
    }
    if (bytes > size) fuzz::fail("tensors of more bytes than the file holds");
  });
  return 0;
}
