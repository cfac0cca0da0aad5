// Writing Hugging Face's safetensors format (model.safetensors): an unsigned 64-bit little-endian
// header length N, N bytes of JSON giving each tensor's dtype, shape and [begin, end) byte range in
// the data that follows (in the order given), then the data. trainer/import/safetensors.h reads it.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace tandem::exporter {

// Writes `tensors` (float32, in this order, names unique) to `path`, with the metadata
// {"format": "pt"} that transformers' save_pretrained writes. The header is padded with spaces to
// a multiple of 8 bytes, as the format's reference writer does. std::runtime_error naming the path
// when it cannot be written; std::invalid_argument for a tensor that is not float32 or a name
// given twice.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

}  // namespace tandem::exporter
