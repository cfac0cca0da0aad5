#include "trainer/checkpoint/tensor_io.h"

#include <algorithm>
#include <optional>
#include <stdexcept>

namespace tandem::checkpoint {
namespace {

using h5::Handle;

constexpr hsize_t kChunkBytes = 4 << 20;  // large tensors are split into chunks of at most 4 MiB

struct Hdf5Types {
  hid_t file;
  hid_t memory;
};

// HDF5 types of the dtypes a checkpoint holds; H5T_NATIVE_* are run-time values, hence a function.
std::optional<Hdf5Types> hdf5_types(torch::ScalarType dtype) {
  switch (dtype) {
    case torch::kFloat32:
      return Hdf5Types{H5T_IEEE_F32LE, H5T_NATIVE_FLOAT};
    case torch::kFloat64:
      return Hdf5Types{H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE};
    case torch::kInt64:
      return Hdf5Types{H5T_STD_I64LE, H5T_NATIVE_INT64};
    case torch::kInt32:
      return Hdf5Types{H5T_STD_I32LE, H5T_NATIVE_INT32};
    case torch::kUInt8:
      return Hdf5Types{H5T_STD_U8LE, H5T_NATIVE_UINT8};
    default:
      return std::nullopt;
  }
}

std::optional<torch::ScalarType> dtype_of(hid_t type) {
  const size_t size = H5Tget_size(type);
  if (H5Tget_class(type) == H5T_FLOAT) {
    if (size == 4) return torch::kFloat32;
    if (size == 8) return torch::kFloat64;
  } else if (H5Tget_class(type) == H5T_INTEGER) {
    const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
    if (is_signed && size == 8) return torch::kInt64;
    if (is_signed && size == 4) return torch::kInt32;
    if (!is_signed && size == 1) return torch::kUInt8;
  }
  return std::nullopt;
}

// Halves dimensions, leading first, until a chunk holds at most kChunkBytes: whole rows stay
// together, and a tensor that fits is a single chunk.
std::vector<hsize_t> chunk_shape(std::vector<hsize_t> dims, hsize_t element_size) {
  auto bytes = [&] {
    hsize_t total = element_size;
    for (hsize_t d : dims) total *= d;
    return total;
  };
  for (hsize_t& d : dims) {
    while (d > 1 && bytes() > kChunkBytes) d = (d + 1) / 2;
  }
  return dims;
}

void check_name(const std::string& name) {
  if (name.empty() || name == "." || name.find('/') != std::string::npos) {
    throw std::runtime_error("invalid tensor name '" + name + "' (empty, '.' or containing '/')");
  }
}

}  // namespace

// One tensor as a dataset; 0-d tensors are stored with shape [1] and a "scalar" attribute.
// Empty tensors have no data to checksum and use HDF5's default (contiguous) layout.
void write_tensor(hid_t group, const std::string& name, const torch::Tensor& tensor) {
  check_name(name);
  const torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
  const std::optional<Hdf5Types> types = hdf5_types(t.scalar_type());
  if (!types) {
    throw std::runtime_error("tensor " + name + " has unsupported dtype " +
                             std::string(c10::toString(t.scalar_type())) +
                             " (float32, float64, int64, int32 or uint8)");
  }
  std::vector<hsize_t> dims(t.sizes().begin(), t.sizes().end());
  if (dims.empty()) dims.push_back(1);
  Handle space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr));
  Handle dcpl(H5Pcreate(H5P_DATASET_CREATE));
  if (t.numel() > 0) {
    const std::vector<hsize_t> chunk = chunk_shape(dims, t.element_size());
    h5::check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), name);
    h5::check(H5Pset_fletcher32(dcpl.get()), name);
  }
  Handle dataset(H5Dcreate2(group, name.c_str(), types->file, space.get(), H5P_DEFAULT, dcpl.get(),
                            H5P_DEFAULT));
  h5::check(dataset.get(), "cannot create dataset " + name);
  if (t.numel() > 0) {
    h5::check(H5Dwrite(dataset.get(), types->memory, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr()),
              "cannot write dataset " + name);
  }
  if (t.dim() == 0) h5::write_attribute(dataset.get(), "scalar", int64_t{1});
}

void write_tensors(hid_t parent, const std::string& group_name, const NamedTensors& tensors) {
  write_tensors(parent, group_name, tensors, [&](size_t index) { return tensors[index].second; });
}

void write_tensors(hid_t parent, const std::string& group_name, const NamedTensors& placeholders,
                   const std::function<torch::Tensor(size_t)>& fetch) {
  check_name(group_name);
  Handle group = h5::create_group(parent, group_name, h5::LinkOrder::kCreation);
  for (size_t i = 0; i < placeholders.size(); ++i) {
    const torch::Tensor tensor = fetch(i);
    if (!tensor.sizes().equals(placeholders[i].second.sizes())) {
      throw std::runtime_error("tensor " + group_name + "/" + placeholders[i].first +
                               ": fetched with another shape than announced");
    }
    write_tensor(group.get(), placeholders[i].first, tensor);
  }
}

void write_bytes(hid_t parent, const std::string& name, const std::string& bytes) {
  // from_blob only reads here; the const_cast is for its signature.
  const torch::Tensor view = torch::from_blob(const_cast<char*>(bytes.data()),
                                              {static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  write_tensor(parent, name, view);
}

Handle open_dataset(hid_t group, const std::string& name, const std::string& full_name) {
  Handle dataset(H5Dopen2(group, name.c_str(), H5P_DEFAULT));
  if (!dataset.valid()) {
    throw std::invalid_argument("cannot open dataset " + full_name + ": " + h5::last_error());
  }
  return dataset;
}

DatasetShape shape_of(hid_t dataset, const std::string& full_name) {
  Handle type(H5Dget_type(dataset));
  const std::optional<torch::ScalarType> dtype = dtype_of(type.get());
  if (!dtype) throw std::invalid_argument("dataset " + full_name + " has an unsupported type");
  if (const std::string problem = h5::storage_problem(dataset); !problem.empty()) {
    throw std::invalid_argument("dataset " + full_name + ": " + problem);
  }
  Handle space(H5Dget_space(dataset));
  std::vector<hsize_t> dims(std::max(H5Sget_simple_extent_ndims(space.get()), 0));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<int64_t> sizes(dims.begin(), dims.end());
  if (h5::read_int_attribute(dataset, "scalar") == 1) {
    // A 0-d tensor is stored as one element: reading more into it would write past it.
    if (H5Sget_simple_extent_npoints(space.get()) != 1) {
      throw std::invalid_argument("dataset " + full_name + " is marked scalar but holds " +
                                  std::to_string(H5Sget_simple_extent_npoints(space.get())) +
                                  " elements");
    }
    sizes.clear();
  }
  return {*dtype, sizes};
}

void read_into(hid_t dataset, const torch::Tensor& tensor, const std::string& full_name) {
  if (tensor.numel() > 0 && H5Dread(dataset, hdf5_types(tensor.scalar_type())->memory, H5S_ALL,
                                    H5S_ALL, H5P_DEFAULT, tensor.data_ptr()) < 0) {
    throw std::invalid_argument("cannot read dataset " + full_name +
                                " (checksum mismatch or corrupt data): " + h5::last_error());
  }
}

torch::Tensor read_tensor(hid_t group, const std::string& name, const std::string& full_name) {
  Handle dataset = open_dataset(group, name, full_name);
  const DatasetShape shape = shape_of(dataset.get(), full_name);
  torch::Tensor tensor = torch::empty(shape.sizes, torch::TensorOptions().dtype(shape.dtype));
  read_into(dataset.get(), tensor, full_name);
  return tensor;
}

Handle require_group(hid_t parent, const std::string& name) {
  Handle group = h5::open_group(parent, name);
  if (!group.valid()) throw std::invalid_argument("group /" + name + " is missing");
  return group;
}

NamedTensors read_tensors(hid_t group, const std::string& group_path) {
  NamedTensors tensors;
  for (const std::string& name : h5::link_names(group)) {
    tensors.emplace_back(name, read_tensor(group, name, group_path + "/" + name));
  }
  return tensors;
}

NamedTensors read_shapes(hid_t group, const std::string& group_path) {
  NamedTensors shapes;
  for (const std::string& name : h5::link_names(group)) {
    const std::string full_name = group_path + "/" + name;
    const Handle dataset = open_dataset(group, name, full_name);
    const DatasetShape shape = shape_of(dataset.get(), full_name);
    shapes.emplace_back(
        name,
        torch::empty(shape.sizes, torch::TensorOptions().dtype(shape.dtype).device(torch::kMeta)));
  }
  return shapes;
}

std::string read_bytes(hid_t parent, const std::string& name, const std::string& full_name) {
  if (H5Lexists(parent, name.c_str(), H5P_DEFAULT) <= 0) {
    throw std::invalid_argument("dataset " + full_name + " is missing");
  }
  const torch::Tensor bytes = read_tensor(parent, name, full_name);
  return std::string(static_cast<const char*>(bytes.data_ptr()), bytes.numel());
}

int64_t require_int(hid_t object, const std::string& name, const std::string& where) {
  const std::optional<int64_t> value = h5::read_int_attribute(object, name);
  if (!value)
    throw std::invalid_argument("integer attribute " + name + " of " + where + " is missing");
  return *value;
}

std::string require_string(hid_t object, const std::string& name) {
  const std::optional<std::string> value = h5::read_string_attribute(object, name);
  if (!value) throw std::invalid_argument("string attribute " + name + " of / is missing");
  return *value;
}

}  // namespace tandem::checkpoint
