#include "trainer/train/checkpoint_writer.h"

#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/model_io.h"
#include "trainer/common/log.h"
#include "trainer/optim/shard_exchange.h"
#include "trainer/train/rng.h"

namespace tandem::train {
namespace {

namespace fs = std::filesystem;

// dir/name becomes the same file as `target` (a hard link, or a copy where links fail), replaced
// atomically, so last.h5 and best.h5 survive pruning of the step files.
void link_as(const std::string& target, const std::string& dir, const std::string& name) {
  const fs::path tmp = fs::path(dir) / (name + ".tmp");
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_hard_link(target, tmp, ec);
  if (ec) fs::copy_file(target, tmp, fs::copy_options::overwrite_existing);
  fs::rename(tmp, fs::path(dir) / name);
}

}  // namespace

CheckpointWriter::CheckpointWriter(const config::Config& config, std::string vocab_bytes,
                                   bool owner)
    : dir_(config.checkpoint.dir),
      keep_last_(config.checkpoint.keep_last),
      config_yaml_(config::to_yaml(config)),
      vocab_bytes_(std::move(vocab_bytes)) {
  if (owner) lock_ = std::make_unique<checkpoint::DirLock>(dir_);
}

std::string CheckpointWriter::step_path(int64_t step) const {
  return (fs::path(dir_) / checkpoint::step_file_name(step)).string();
}

void CheckpointWriter::save(const RunState& state, parallel::Communicator& comm,
                            parallel::Communicator& tensors) const {
  const auto parameters = checkpoint::named_parameters(state.model);
  auto rngs = comm.gather_bytes(dropout_rng_state(parameters.front().second.device()), 0);
  // Sharded state: every rank's pieces, whole, on rank 0.
  const optim::ShardPlan& plan = state.adam.plan();
  const auto whole = [&](const checkpoint::NamedTensors& pieces, const torch::TensorOptions& type) {
    std::vector<torch::Tensor> mine;
    for (const auto& [name, piece] : pieces) mine.push_back(piece);
    const auto gathered = optim::gather_whole(plan, mine, type, tensors);
    checkpoint::NamedTensors named;
    for (size_t i = 0; i < gathered.size(); ++i)
      named.emplace_back(parameters[i].first, gathered[i]);
    return named;
  };
  const torch::TensorOptions param_type = parameters.front().second.options();
  std::map<std::string, checkpoint::NamedTensors> optimizer;
  for (const auto& [group, pieces] : state.adam.state())
    optimizer[group] = whole(pieces, param_type);
  checkpoint::NamedTensors ema;
  if (state.ema) ema = whole(state.ema->averages(), param_type.dtype(torch::kFloat32));
  if (comm.rank() != 0) return;
  checkpoint::CheckpointData data;
  data.step = state.step;
  data.world_size = comm.size();
  data.model = parameters;
  data.ema = std::move(ema);
  data.optimizer = std::move(optimizer);
  data.optimizer_step = state.adam.step_count();
  data.schedule = {{"lr", state.lr}};
  data.data_epoch = state.position.epoch;
  data.data_next_batch = state.position.next_batch;
  data.rng = std::move(rngs);
  data.config_yaml = config_yaml_;
  data.validation = state.validation;
  data.vocab = vocab_bytes_;
  const std::string path = step_path(state.step);
  checkpoint::save(path, data);
  link_as(path, dir_, "last.h5");
  checkpoint::prune(dir_, keep_last_);
  log::info("saved " + path + " (step " + std::to_string(state.step) + ")");
}

void CheckpointWriter::link_best(int64_t step) const { link_as(step_path(step), dir_, "best.h5"); }

}  // namespace tandem::train
