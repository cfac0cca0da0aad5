// Averaging checkpoints: float64 running sums over the inputs, read one at a time, checked
// against the first input's names and shapes.
#include "trainer/checkpoint/average.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <utility>

namespace tandem::checkpoint {
namespace {

// The mean of `count` values summed in `sum` (float64), in `dtype`. Division rather than
// multiplication by 1/count, so that the mean of two float32 values is exact before the final
// rounding to float32.
torch::Tensor mean_as(const torch::Tensor& sum, int64_t count, torch::ScalarType dtype) {
  torch::Tensor mean = sum.div(static_cast<double>(count));
  if (!torch::isFloatingType(dtype)) mean = mean.round();
  return mean.to(dtype);
}

using Sums = std::map<std::string, torch::Tensor>;

// Adds `tensors` to `sums` (float64), starting them on the first input; later inputs must have the
// first one's names and shapes (`first`, which the first input fills).
void accumulate(const std::vector<std::string>& paths, size_t i, const NamedTensors& tensors,
                Sums& sums, NamedTensors& first) {
  if (i == 0) {
    for (const auto& [name, tensor] : tensors) {
      sums[name] = tensor.to(torch::kFloat64, /*non_blocking=*/false, /*copy=*/true);
      first.emplace_back(name, sums[name]);
    }
    return;
  }
  try {
    check_compatible(paths[i], tensors, first);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("cannot average with '" + paths[0] + "': " + e.what());
  }
  for (const auto& [name, tensor] : tensors) sums[name].add_(tensor.to(torch::kFloat64));
}

// The averaged checkpoint: the newest input's metadata around the means of `sums` (and of
// `ema_sums`, when every input had a moving average).
CheckpointData averaged(CheckpointData newest, const Sums& sums, const Sums& ema_sums,
                        const std::vector<std::string>& paths) {
  CheckpointData out;
  out.step = newest.step;
  out.world_size = newest.world_size;
  out.config_yaml = std::move(newest.config_yaml);
  out.vocab = std::move(newest.vocab);
  out.averaged_from = paths;
  out.lora_base_hash = std::move(newest.lora_base_hash);
  const auto count = static_cast<int64_t>(paths.size());
  for (const auto& [name, tensor] : newest.model) {
    out.model.emplace_back(name, mean_as(sums.at(name), count, tensor.scalar_type()));
    if (!ema_sums.empty()) {
      out.ema.emplace_back(name, mean_as(ema_sums.at(name), count, torch::kFloat32));
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> last_step_files(const std::string& dir, int64_t count) {
  if (count < 1) {
    throw std::invalid_argument("average: the number of checkpoints must be >= 1, not " +
                                std::to_string(count));
  }
  if (!std::filesystem::is_directory(dir)) {
    throw std::invalid_argument("checkpoint directory '" + dir + "' does not exist");
  }
  std::vector<std::string> files = step_files(dir);  // newest first
  if (static_cast<int64_t>(files.size()) < count) {
    throw std::invalid_argument("checkpoint directory '" + dir + "' holds " +
                                std::to_string(files.size()) + " step-*.h5 file(s), fewer than " +
                                std::to_string(count));
  }
  files.resize(static_cast<size_t>(count));
  std::reverse(files.begin(), files.end());
  return files;
}

CheckpointData average(const std::vector<std::string>& paths) {
  if (paths.empty()) throw std::invalid_argument("average: no checkpoints given");
  Sums sums, ema_sums;
  NamedTensors first, first_ema;  // the first input's names with its sums' shapes
  bool every_input_has_ema = true;
  CheckpointData newest;
  for (size_t i = 0; i < paths.size(); ++i) {
    CheckpointData input = load_model_only(paths[i]);
    // LoRA checkpoints average their adapters, which mean the same only over one base.
    if (i > 0 && input.lora_base_hash != newest.lora_base_hash) {
      throw std::invalid_argument("cannot average '" + paths[i] + "' with '" + paths[0] +
                                  "': they are " +
                                  (input.lora_base_hash.empty() || newest.lora_base_hash.empty()
                                       ? "not both LoRA adapters"
                                       : "LoRA adapters on bases of other content"));
    }
    accumulate(paths, i, input.model, sums, first);
    every_input_has_ema = every_input_has_ema && !input.ema.empty();
    if (every_input_has_ema) {
      accumulate(paths, i, input.ema, ema_sums, first_ema);
    } else {
      ema_sums.clear();
    }
    if (i == 0 || input.step >= newest.step) newest = std::move(input);
  }
  return averaged(std::move(newest), sums, ema_sums, paths);
}

}  // namespace tandem::checkpoint
