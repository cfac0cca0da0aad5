// Safetensors files written by hand for the import's tests: the 8-byte little-endian header size,
// the header, the data.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "trainer/common/temp_dir.h"

namespace tandem::importer {

inline std::string write_file(const TempDir& dir, const std::string& name,
                              const std::string& header, const std::string& data) {
  const std::string path = dir.file(name);
  std::ofstream out(path, std::ios::binary);
  uint64_t size = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(size >> (8 * i) & 0xff));
  out << header << data;
  return path;
}

// A tensor's bytes as stored (contiguous, this machine's byte order).
inline std::string bytes_of(const torch::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), t.numel() * t.element_size());
}

}  // namespace tandem::importer
