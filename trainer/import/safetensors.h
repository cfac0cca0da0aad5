// Reading Hugging Face's safetensors files (model.safetensors), the format `save_pretrained`
// writes by default: an unsigned 64-bit little-endian header length N, N bytes of JSON naming each
// tensor's dtype, shape and [begin, end) byte range in the data that follows, then the data.
#pragma once

#include <torch/torch.h>

#include <map>
#include <string>

namespace tandem::importer {

// Every tensor of the file by name, as stored (F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL),
// in CPU memory of their own. std::invalid_argument naming the file and the problem for a file
// that is missing, shorter than its header says, has a header that is not such JSON, a tensor
// whose range does not match its shape and dtype or lies outside the data, or an unknown dtype.
std::map<std::string, torch::Tensor> read_safetensors(const std::string& path);

}  // namespace tandem::importer
