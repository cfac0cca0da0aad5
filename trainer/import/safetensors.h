// Reading Hugging Face's safetensors files (model.safetensors), the format `save_pretrained`
// writes by default: an unsigned 64-bit little-endian header length N, N bytes of JSON naming each
// tensor's dtype, shape and [begin, end) byte range in the data that follows, then the data.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace tandem::importer {

// A safetensors file opened for reading one tensor, or some rows of one, at a time: the header is
// read and every entry checked when the file is opened; the data only when asked, so that a model
// larger than memory converts a tensor at a time. Errors are std::invalid_argument naming the file
// and the problem: a file that is missing, shorter than its header says, has a header that is not
// such JSON, a tensor whose range does not match its shape and dtype or lies outside the data, or
// an unknown dtype (F64, F32, F16, BF16, I64, I32, I16, I8, U8 and BOOL are read).
class SafetensorsFile {
 public:
  struct Entry {
    torch::ScalarType dtype;
    std::vector<int64_t> shape;
    uint64_t offset = 0;  // of its first byte in the file
  };

  explicit SafetensorsFile(std::string path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, Entry>& entries() const { return entries_; }
  // The tensor as stored, in CPU memory of its own.
  torch::Tensor read(const std::string& name) const;
  // Rows [begin, begin + count) of its first dimension, as stored.
  torch::Tensor read_rows(const std::string& name, int64_t begin, int64_t count) const;

 private:
  const Entry& entry(const std::string& name) const;
  void read_bytes(uint64_t at, uint64_t count, void* out) const;

  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::map<std::string, Entry> entries_;
};

// Every tensor of the file by name, as stored, whole; the errors of SafetensorsFile.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

}  // namespace tandem::importer
