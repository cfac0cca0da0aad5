// Checkpoint files (layout in checkpoint.h): tensors as Fletcher32-checksummed chunked datasets
// named by their dotted parameter names, scalars as attributes, written to <path>.tmp and renamed
// into place so a reader never sees a half-written checkpoint.
#include "trainer/checkpoint/checkpoint.h"

#include <fcntl.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "trainer/common/hdf5.h"
#include "trainer/common/timestamp.h"

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
  check_name(group_name);
  Handle group = h5::create_group(parent, group_name, h5::LinkOrder::kCreation);
  for (const auto& [name, tensor] : tensors) write_tensor(group.get(), name, tensor);
}

void write_bytes(hid_t parent, const std::string& name, const std::string& bytes) {
  // from_blob only reads here; the const_cast is for its signature.
  const torch::Tensor view = torch::from_blob(const_cast<char*>(bytes.data()),
                                              {static_cast<int64_t>(bytes.size())}, torch::kUInt8);
  write_tensor(parent, name, view);
}


void write_root_attributes(hid_t file, const CheckpointData& data) {
  h5::write_attribute(file, "format", std::string(kFormatName));
  h5::write_attribute(file, "format_version", kFormatVersion);
  h5::write_attribute(file, "step", data.step);
  h5::write_attribute(file, "world_size", data.world_size);
  h5::write_attribute(file, "torch_version",
                      data.torch_version.empty() ? std::string(TORCH_VERSION) : data.torch_version);
  h5::write_attribute(file, "created", data.created.empty() ? utc_now_iso8601() : data.created);
  if (!data.averaged_from.empty()) {
    std::string paths;
    for (const std::string& path : data.averaged_from) paths += (paths.empty() ? "" : "\n") + path;
    h5::write_attribute(file, "averaged_from", paths);
  }
}

void write_contents(hid_t file, const CheckpointData& data) {
  write_root_attributes(file, data);
  write_tensors(file, "model", data.model);
  if (!data.ema.empty()) write_tensors(file, "ema", data.ema);
  Handle optimizer = h5::create_group(file, "optimizer", h5::LinkOrder::kCreation);
  h5::write_attribute(optimizer.get(), "step", data.optimizer_step);
  for (const auto& [group, tensors] : data.optimizer)
    write_tensors(optimizer.get(), group, tensors);
  Handle schedule = h5::create_group(file, "schedule", h5::LinkOrder::kCreation);
  for (const auto& [key, value] : data.schedule) h5::write_attribute(schedule.get(), key, value);
  Handle position = h5::create_group(file, "data", h5::LinkOrder::kCreation);
  h5::write_attribute(position.get(), "epoch", data.data_epoch);
  h5::write_attribute(position.get(), "next_batch", data.data_next_batch);
  Handle rng = h5::create_group(file, "rng", h5::LinkOrder::kCreation);
  for (size_t rank = 0; rank < data.rng.size(); ++rank) {
    write_bytes(rng.get(), "rank_" + std::to_string(rank), data.rng[rank]);
  }
  h5::write_string_dataset(file, "config", data.config_yaml);
  if (!data.validation.empty()) h5::write_string_dataset(file, "validation", data.validation);
  write_bytes(file, "vocab", data.vocab);
}

void write_file(const std::string& path, const CheckpointData& data) {
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS));
  // The 1.8 object format: checksummed metadata and creation-ordered groups; h5dump >= 1.8 reads
  // it.
  h5::check(H5Pset_libver_bounds(fapl.get(), H5F_LIBVER_V18, H5F_LIBVER_LATEST), "file access");
#if H5_VERSION_GE(1, 10, 7)
  // Shared file systems without lock support (some NFS, Lustre) must not fail the save.
  h5::check(H5Pset_file_locking(fapl.get(), true, true), "file access");
#endif
  Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()));
  h5::check(file.get(), "cannot create the file");
  write_contents(file.get(), data);
  h5::check(H5Fflush(file.get(), H5F_SCOPE_GLOBAL), "cannot flush the file");
  h5::check(file.close(), "cannot close the file");
}

void fsync_path(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) throw std::runtime_error("cannot open " + path + " to sync: " + std::strerror(errno));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (status != 0) throw std::runtime_error("cannot sync " + path + ": " + std::strerror(error));
}

// Data on disk before the name points at it, and the new name on disk before we return.
void publish(const std::string& tmp, const std::string& path) {
  fsync_path(tmp, O_RDONLY);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    throw std::runtime_error("cannot rename " + tmp + ": " + std::strerror(errno));
  }
  const std::string dir = std::filesystem::path(path).parent_path().string();
  fsync_path(dir.empty() ? "." : dir, O_RDONLY | O_DIRECTORY);
}

// Bytes the file's contents take before HDF5's overhead: what a save needs on disk, about.
double content_bytes(const CheckpointData& data) {
  double bytes =
      static_cast<double>(data.vocab.size() + data.config_yaml.size() + data.validation.size());
  const auto add = [&](const NamedTensors& tensors) {
    for (const auto& [name, t] : tensors)
      bytes += static_cast<double>(t.numel() * t.element_size());
  };
  add(data.model);
  add(data.ema);
  for (const auto& [group, tensors] : data.optimizer) add(tensors);
  for (const auto& state : data.rng) bytes += static_cast<double>(state.size());
  return bytes;
}

// Bytes free to this user where `path` is to be written; -1 when unknown.
double free_bytes(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  std::error_code ec;
  const auto space = std::filesystem::space(dir.empty() ? "." : dir, ec);
  return ec ? -1.0 : static_cast<double>(space.available);
}

// One line for a failed save: the OS error when HDF5 reports one (its message buries "errno = 28,
// error message = 'No space left on device'" in a long line of file offsets), and for a full
// disk what the file needs and what is free.
std::string save_failure(const std::string& path, const std::string& error,
                         const CheckpointData& data) {
  static const std::regex kErrno("errno = ([0-9]+)");
  std::smatch match;
  const bool os_error = std::regex_search(error, match, kErrno);
  const int code = os_error ? std::stoi(match[1].str()) : 0;
  std::string line =
      "checkpoint: cannot write '" + path + "': " +
      (os_error ? std::string(std::strerror(code)) + " (errno " + std::to_string(code) + ")"
                : error);
  if (code == ENOSPC || code == EDQUOT) {
    char sizes[160];
    std::snprintf(sizes, sizeof sizes, "; it needs about %.1f MB, %.1f MB are free there",
                  content_bytes(data) / 1e6, std::max(0.0, free_bytes(path)) / 1e6);
    line += sizes;
  }
  return line + "; earlier checkpoints are untouched";
}

// A save that cannot fit fails before the file is begun, as the OS would report it.
void check_space(const std::string& path, const CheckpointData& data) {
  constexpr double kOverhead = 1.05, kMetadataBytes = 64 << 10;  // chunk indexes, checksums, groups
  const double available = free_bytes(path);
  if (available >= 0 && available < content_bytes(data) * kOverhead + kMetadataBytes) {
    throw std::runtime_error("errno = " + std::to_string(ENOSPC) + " (checked before writing)");
  }
}

// ---- reading: every problem is std::invalid_argument(problem); the caller prefixes the path.

// HDF5 says "truncated file: eof = 300000, sblock->base_addr = 0, stored_eof = 935665"; users
// need the two sizes, not the superblock's field names.
std::string truncated(const std::string& detail) {
  static const std::regex kSizes("eof = ([0-9]+),.*stored_eof = ([0-9]+)");
  std::smatch sizes;
  if (!std::regex_search(detail, sizes, kSizes)) {
    return "the file is truncated (an interrupted write or copy?): " + detail;
  }
  return "the file is truncated: " + sizes[1].str() + " of " + sizes[2].str() +
         " bytes (an interrupted write or copy?)";
}

Handle open_checkpoint(const std::string& path) {
  if (::access(path.c_str(), R_OK) != 0) {
    throw std::invalid_argument(std::string("cannot open (") + std::strerror(errno) + ")");
  }
  if (!h5::is_hdf5(path)) throw std::invalid_argument("not an HDF5 file");
  Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
  if (!file.valid()) {
    const std::string detail = h5::last_error();
    if (detail.find("truncated") != std::string::npos) throw std::invalid_argument(truncated(detail));
    throw std::invalid_argument("cannot be read as HDF5: " + detail);
  }
  if (h5::read_string_attribute(file.get(), "format") != std::string(kFormatName)) {
    throw std::invalid_argument(
        std::string("an HDF5 file but not a Tandem checkpoint (no root attribute format = ") +
        kFormatName + ")");
  }
  const std::optional<int64_t> version = h5::read_int_attribute(file.get(), "format_version");
  if (version != kFormatVersion) {
    throw std::invalid_argument(
        "format_version " + (version ? std::to_string(*version) : "(missing)") +
        " is not supported (this build reads " + std::to_string(kFormatVersion) + ")");
  }
  return file;
}

// A dataset's element type and shape (a scalar when it has the attribute scalar = 1).
struct DatasetShape {
  torch::ScalarType dtype;
  std::vector<int64_t> sizes;
};

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
  Handle space(H5Dget_space(dataset));
  std::vector<hsize_t> dims(std::max(H5Sget_simple_extent_ndims(space.get()), 0));
  H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  std::vector<int64_t> sizes(dims.begin(), dims.end());
  if (h5::read_int_attribute(dataset, "scalar") == 1) sizes.clear();
  return {*dtype, sizes};
}

// Reads the whole dataset into `tensor`, which has its shape and type (contiguous, CPU).
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

void read_model_part(hid_t file, CheckpointData& data, bool tensors) {
  data.step = require_int(file, "step", "/");
  data.world_size = require_int(file, "world_size", "/");
  data.torch_version = require_string(file, "torch_version");
  data.created = require_string(file, "created");
  if (const auto averaged = h5::read_string_attribute(file, "averaged_from")) {
    std::istringstream paths(*averaged);
    for (std::string path; std::getline(paths, path);) data.averaged_from.push_back(path);
  }
  data.holds_ema = H5Lexists(file, "ema", H5P_DEFAULT) > 0;
  if (tensors) {
    data.model = read_tensors(require_group(file, "model").get(), "/model");
    if (data.holds_ema) data.ema = read_tensors(require_group(file, "ema").get(), "/ema");
  }
  const std::optional<std::string> config = h5::read_string_dataset(file, "config");
  if (!config) throw std::invalid_argument("string dataset /config is missing or unreadable");
  data.config_yaml = *config;
  data.vocab = read_bytes(file, "vocab", "/vocab");
}

void read_training_part(hid_t file, CheckpointData& data) {
  if (const auto validation = h5::read_string_dataset(file, "validation")) {
    data.validation = *validation;
  }
  Handle optimizer = require_group(file, "optimizer");
  data.optimizer_step = require_int(optimizer.get(), "step", "/optimizer");
  for (const std::string& name : h5::link_names(optimizer.get())) {
    data.optimizer[name] =
        read_tensors(require_group(optimizer.get(), name).get(), "/optimizer/" + name);
  }
  Handle schedule = require_group(file, "schedule");
  for (const std::string& key : h5::attribute_names(schedule.get())) {
    const std::optional<double> value = h5::read_double_attribute(schedule.get(), key);
    if (!value) throw std::invalid_argument("attribute " + key + " of /schedule is not a number");
    data.schedule[key] = *value;
  }
  Handle position = require_group(file, "data");
  data.data_epoch = require_int(position.get(), "epoch", "/data");
  data.data_next_batch = require_int(position.get(), "next_batch", "/data");
  Handle rng = require_group(file, "rng");
  const size_t ranks = h5::link_names(rng.get()).size();
  for (size_t rank = 0; rank < ranks; ++rank) {
    const std::string name = "rank_" + std::to_string(rank);
    data.rng.push_back(read_bytes(rng.get(), name, "/rng/" + name));
  }
}

// Runs `read` on the open checkpoint at `path`, its errors named after the file (once: those that
// already name it, as check_compatible's do, pass as they are).
template <typename Read>
auto with_checkpoint(const std::string& path, const Read& read) {
  h5::QuietErrors quiet;
  const std::string named = "checkpoint '" + path + "'";
  try {
    Handle file = open_checkpoint(path);
    return read(file.get());
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind(named, 0) == 0) throw;
    throw std::invalid_argument(named + ": " + e.what());
  } catch (const std::runtime_error& e) {  // listing a damaged group
    throw std::invalid_argument(named + ": " + e.what());
  }
}

CheckpointData read_checkpoint(const std::string& path, bool training_state, bool tensors = true) {
  return with_checkpoint(path, [&](hid_t file) {
    CheckpointData data;
    read_model_part(file, data, tensors);
    if (training_state) read_training_part(file, data);
    return data;
  });
}

std::string shape_text(const torch::Tensor& t) {
  std::string text = "[";
  for (int64_t i = 0; i < t.dim(); ++i) text += (i > 0 ? ", " : "") + std::to_string(t.size(i));
  return text + "]";
}

}  // namespace

void save(const std::string& path, const CheckpointData& data) {
  h5::QuietErrors quiet;
  const std::string tmp = path + ".tmp";
  std::remove(tmp.c_str());  // a stale one from a crashed save
  try {
    check_space(tmp, data);
    write_file(tmp, data);
    publish(tmp, path);
  } catch (const std::exception& e) {
    std::remove(tmp.c_str());
    throw std::runtime_error(save_failure(path, e.what(), data));
  }
}

CheckpointData load(const std::string& path) { return read_checkpoint(path, true); }

CheckpointData load_model_only(const std::string& path) { return read_checkpoint(path, false); }

CheckpointData load_description(const std::string& path) {
  return read_checkpoint(path, false, false);
}

void read_parameters(const std::string& path, const std::string& group,
                     const NamedTensors& params) {
  with_checkpoint(path, [&](hid_t file) {
    Handle tensors = require_group(file, group);
    struct Saved {
      Handle dataset;
      torch::ScalarType dtype;
    };
    std::map<std::string, Saved> datasets;
    NamedTensors shapes;  // meta tensors: the datasets' shapes and types, no memory
    for (const std::string& name : h5::link_names(tensors.get())) {
      const std::string full_name = "/" + group + "/" + name;
      Handle dataset = open_dataset(tensors.get(), name, full_name);
      const DatasetShape shape = shape_of(dataset.get(), full_name);
      shapes.emplace_back(
          name, torch::empty(shape.sizes,
                             torch::TensorOptions().dtype(shape.dtype).device(torch::kMeta)));
      datasets.emplace(name, Saved{std::move(dataset), shape.dtype});
    }
    check_compatible(path, shapes, params);
    torch::NoGradGuard no_grad;
    for (const auto& [name, param] : params) {
      const Saved& saved = datasets.at(name);
      const std::string full_name = "/" + group + "/" + name;
      if (param.is_cpu() && param.is_contiguous() && param.scalar_type() == saved.dtype) {
        read_into(saved.dataset.get(), param, full_name);
      } else {  // through a CPU tensor of the saved type, from the dataset already open
        const torch::Tensor staged =
            torch::empty(param.sizes(), torch::TensorOptions().dtype(saved.dtype));
        read_into(saved.dataset.get(), staged, full_name);
        param.copy_(staged);
      }
    }
    return 0;
  });
}

void check_compatible(const std::string& path, const NamedTensors& checkpoint_params,
                      const NamedTensors& model_params) {
  constexpr size_t kShown = 5;
  std::map<std::string, const torch::Tensor*> saved;
  for (const auto& [name, tensor] : checkpoint_params) saved[name] = &tensor;
  std::vector<std::string> differences;
  for (const auto& [name, tensor] : model_params) {
    const auto found = saved.find(name);
    if (found == saved.end()) {
      differences.push_back("missing in the checkpoint: " + name);
    } else {
      if (!found->second->sizes().equals(tensor.sizes())) {
        differences.push_back("shape of " + name + ": checkpoint " + shape_text(*found->second) +
                              " vs model " + shape_text(tensor));
      }
      saved.erase(found);
    }
  }
  for (const auto& [name, tensor] : saved) differences.push_back("not in the model: " + name);
  if (differences.empty()) return;
  std::string message = "checkpoint '" + path + "' does not fit the model (" +
                        std::to_string(differences.size()) + " differences): ";
  for (size_t i = 0; i < differences.size() && i < kShown; ++i) {
    message += (i > 0 ? "; " : "") + differences[i];
  }
  if (differences.size() > kShown) message += "; ...";
  throw std::invalid_argument(message);
}

}  // namespace tandem::checkpoint
