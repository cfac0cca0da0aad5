// A checkpoint's tensors and bytes as HDF5 datasets: written chunked and Fletcher32-checksummed,
// read back with their dtype and shape; every reading problem is std::invalid_argument.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/checkpoint/checkpoint_data.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::checkpoint {

// One tensor as a dataset of `group`; 0-d tensors are stored with shape [1] and a "scalar"
// attribute. float32, float64, int64, int32 or uint8; names may not be empty, '.' or hold '/'.
void write_tensor(hid_t group, const std::string& name, const torch::Tensor& tensor);
// The tensors as datasets of a new group `group_name` of `parent`, in their order.
void write_tensors(hid_t parent, const std::string& group_name, const NamedTensors& tensors);
// The same, each dataset's values asked of `fetch` (by index) just before it is written, the
// tensors given standing for them (names; shapes).
void write_tensors(hid_t parent, const std::string& group_name, const NamedTensors& placeholders,
                   const std::function<torch::Tensor(size_t)>& fetch);
// Bytes as a uint8 dataset.
void write_bytes(hid_t parent, const std::string& name, const std::string& bytes);

// A dataset's element type and shape (a scalar when it has the attribute scalar = 1, which only a
// one-element dataset may have); refused when the file stores too few bytes for that shape
// (h5::storage_problem), before anything is allocated for it.
struct DatasetShape {
  torch::ScalarType dtype;
  std::vector<int64_t> sizes;
};

h5::Handle open_dataset(hid_t group, const std::string& name, const std::string& full_name);
DatasetShape shape_of(hid_t dataset, const std::string& full_name);
// Reads the whole dataset into `tensor`, which has its shape and type (contiguous, CPU).
void read_into(hid_t dataset, const torch::Tensor& tensor, const std::string& full_name);
torch::Tensor read_tensor(hid_t group, const std::string& name, const std::string& full_name);
// Every dataset of `group`, in creation order; group_path names them in errors.
NamedTensors read_tensors(hid_t group, const std::string& group_path);
// The same as meta tensors: each dataset's name, shape and type, checked as shape_of checks them,
// without reading (or allocating for) its values.
NamedTensors read_shapes(hid_t group, const std::string& group_path);
std::string read_bytes(hid_t parent, const std::string& name, const std::string& full_name);
h5::Handle require_group(hid_t parent, const std::string& name);
int64_t require_int(hid_t object, const std::string& name, const std::string& where);
std::string require_string(hid_t object, const std::string& name);

}  // namespace tandem::checkpoint
