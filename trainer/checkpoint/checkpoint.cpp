// The checkpoint's description (layout in checkpoint.h): what goes where in the file, written
// through tensor_io and atomic_write, and read back whole, in parts, or into a model's parameters.
#include "trainer/checkpoint/checkpoint.h"

#include <torch/version.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "trainer/checkpoint/atomic_write.h"
#include "trainer/checkpoint/tensor_io.h"
#include "trainer/common/timestamp.h"
#include "trainer/hdf5/hdf5.h"

namespace tandem::checkpoint {
namespace {

using h5::Handle;

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
  if (!data.lora_base_hash.empty()) h5::write_attribute(file, "lora_base_hash", data.lora_base_hash);
}

// Whether the group's tensors are placeholders, which save() fetches.
bool placeholders(const NamedTensors& tensors) {
  return !tensors.empty() && tensors.front().second.is_meta();
}

// Group `name` of `parent`, whose path streamed_groups() calls `path`: its tensors as they are, or
// each fetched in turn.
void write_group(hid_t parent, const std::string& name, const std::string& path,
                 const NamedTensors& tensors, const CheckpointData& data) {
  if (!data.fetch || !placeholders(tensors)) {
    write_tensors(parent, name, tensors);
    return;
  }
  write_tensors(parent, name, tensors, [&](size_t index) { return data.fetch(path, index); });
}

void write_contents(hid_t file, const CheckpointData& data) {
  write_root_attributes(file, data);
  write_group(file, "model", "model", data.model, data);
  if (!data.ema.empty()) write_group(file, "ema", "ema", data.ema, data);
  Handle optimizer = h5::create_group(file, "optimizer", h5::LinkOrder::kCreation);
  h5::write_attribute(optimizer.get(), "step", data.optimizer_step);
  for (const auto& [group, tensors] : data.optimizer) {
    write_group(optimizer.get(), group, "optimizer/" + group, tensors, data);
  }
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

// Reading: every problem is std::invalid_argument(problem); with_checkpoint prefixes the path.

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
    if (detail.find("truncated") != std::string::npos)
      throw std::invalid_argument(truncated(detail));
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

// What a reader takes of the tensor groups: their values, their shapes (meta tensors), or nothing.
enum class Tensors { kValues, kShapes, kNone };

NamedTensors read_group(hid_t group, const std::string& path, Tensors tensors) {
  return tensors == Tensors::kValues ? read_tensors(group, path) : read_shapes(group, path);
}

void read_model_part(hid_t file, CheckpointData& data, Tensors tensors) {
  data.step = require_int(file, "step", "/");
  data.world_size = require_int(file, "world_size", "/");
  data.torch_version = require_string(file, "torch_version");
  data.created = require_string(file, "created");
  if (const auto averaged = h5::read_string_attribute(file, "averaged_from")) {
    std::istringstream paths(*averaged);
    for (std::string path; std::getline(paths, path);) data.averaged_from.push_back(path);
  }
  if (const auto hash = h5::read_string_attribute(file, "lora_base_hash")) data.lora_base_hash = *hash;
  data.holds_ema = H5Lexists(file, "ema", H5P_DEFAULT) > 0;
  if (tensors != Tensors::kNone) {
    data.model = read_group(require_group(file, "model").get(), "/model", tensors);
    if (data.holds_ema) data.ema = read_group(require_group(file, "ema").get(), "/ema", tensors);
  }
  const std::optional<std::string> config = h5::read_string_dataset(file, "config");
  if (!config) throw std::invalid_argument("string dataset /config is missing or unreadable");
  data.config_yaml = *config;
  data.vocab = read_bytes(file, "vocab", "/vocab");
}

void read_training_part(hid_t file, CheckpointData& data, Tensors tensors) {
  if (const auto validation = h5::read_string_dataset(file, "validation")) {
    data.validation = *validation;
  }
  Handle optimizer = require_group(file, "optimizer");
  data.optimizer_step = require_int(optimizer.get(), "step", "/optimizer");
  for (const std::string& name : h5::link_names(optimizer.get())) {
    data.optimizer[name] =
        read_group(require_group(optimizer.get(), name).get(), "/optimizer/" + name, tensors);
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

// Runs `read`, its errors named after the checkpoint at `path` (once: those that already name it,
// as check_compatible's do, pass as they are).
template <typename Read>
auto with_named_errors(const std::string& path, const Read& read) {
  h5::QuietErrors quiet;
  const std::string named = "checkpoint '" + path + "'";
  try {
    return read();
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).rfind(named, 0) == 0) throw;
    throw std::invalid_argument(named + ": " + e.what());
  } catch (const std::runtime_error& e) {  // listing a damaged group
    throw std::invalid_argument(named + ": " + e.what());
  }
}

// Runs `read` on the open checkpoint at `path`, its errors named after the file.
template <typename Read>
auto with_checkpoint(const std::string& path, const Read& read) {
  return with_named_errors(path, [&] {
    Handle file = open_checkpoint(path);
    return read(file.get());
  });
}

CheckpointData read_checkpoint(const std::string& path, bool training_state,
                               Tensors tensors = Tensors::kValues) {
  return with_checkpoint(path, [&](hid_t file) {
    CheckpointData data;
    read_model_part(file, data, tensors);
    if (training_state) read_training_part(file, data, tensors);
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
  write_atomically(path, data, [&](hid_t file) { write_contents(file, data); });
}

std::vector<std::pair<std::string, const NamedTensors*>> streamed_groups(
    const CheckpointData& data) {
  std::vector<std::pair<std::string, const NamedTensors*>> groups;
  if (placeholders(data.model)) groups.emplace_back("model", &data.model);
  if (placeholders(data.ema)) groups.emplace_back("ema", &data.ema);
  for (const auto& [group, tensors] : data.optimizer) {
    if (placeholders(tensors)) groups.emplace_back("optimizer/" + group, &tensors);
  }
  return groups;
}

CheckpointData load(const std::string& path) { return read_checkpoint(path, true); }

CheckpointData load_model_only(const std::string& path) { return read_checkpoint(path, false); }

CheckpointData load_description(const std::string& path) {
  return read_checkpoint(path, false, Tensors::kNone);
}

CheckpointData load_outline(const std::string& path) {
  return read_checkpoint(path, true, Tensors::kShapes);
}

struct GroupReader::Open {
  std::string path;
  std::string group;
  Handle file;
  Handle tensors;  // closed before the file
};

GroupReader::GroupReader(const std::string& path, const std::string& group)
    : open_(with_named_errors(path, [&] {
        auto open = std::make_unique<Open>();
        open->path = path;
        open->group = group;
        open->file = open_checkpoint(path);
        open->tensors = require_group(open->file.get(), group);
        return open;
      })) {}

GroupReader::~GroupReader() = default;

torch::Tensor GroupReader::read(const std::string& name) const {
  return with_named_errors(open_->path, [&] {
    return read_tensor(open_->tensors.get(), name, "/" + open_->group + "/" + name);
  });
}

void read_parameters(const std::string& path, const std::string& group,
                     const NamedTensors& params) {
  with_checkpoint(path, [&](hid_t file) {
    Handle tensors = require_group(file, group);
    check_compatible(path, read_shapes(tensors.get(), "/" + group), params);
    torch::NoGradGuard no_grad;
    for (const auto& [name, param] : params) {
      const std::string full_name = "/" + group + "/" + name;
      const Handle dataset = open_dataset(tensors.get(), name, full_name);
      const DatasetShape saved = shape_of(dataset.get(), full_name);
      if (param.is_cpu() && param.is_contiguous() && param.scalar_type() == saved.dtype) {
        read_into(dataset.get(), param, full_name);
      } else {  // through a CPU tensor of the saved type
        const torch::Tensor staged =
            torch::empty(param.sizes(), torch::TensorOptions().dtype(saved.dtype));
        read_into(dataset.get(), staged, full_name);
        param.copy_(staged);
      }
    }
    return 0;
  });
}

int64_t stored_elements(const std::string& path, const std::string& group) {
  return with_checkpoint(path, [&](hid_t file) {
    Handle tensors = require_group(file, group);
    int64_t total = 0;
    for (const std::string& name : h5::link_names(tensors.get())) {
      const std::string full_name = "/" + group + "/" + name;
      Handle dataset = open_dataset(tensors.get(), name, full_name);
      int64_t elements = 1;
      for (const int64_t size : shape_of(dataset.get(), full_name).sizes) elements *= size;
      total += elements;  // shape_of bounds each by the file's bytes: no overflow
    }
    return total;
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
