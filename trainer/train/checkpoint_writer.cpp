#include "trainer/train/checkpoint_writer.h"

#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/log.h"
#include "trainer/model_io/model_io.h"
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

// A sharded state's groups (this rank's pieces in `data`) become whole-tensor placeholders that
// rank 0's save fetches one at a time, each gathered from the pieces' owners; the other ranks take
// part in the same gathers, in the same order, here.
void stream_pieces(const optim::ShardPlan& plan, const checkpoint::NamedTensors& parameters,
                   bool with_ema, parallel::Communicator& tensors,
                   checkpoint::CheckpointData& data) {
  struct Group {
    std::vector<torch::Tensor> pieces;  // this rank's, in plan.owned() order
    torch::TensorOptions options;       // their type, on the parameters' device
  };
  std::map<std::string, Group> groups;  // "ema", "optimizer/<group>"
  const auto stand_in = [&](const std::string& group, checkpoint::NamedTensors& mine,
                            torch::ScalarType dtype) {
    const torch::TensorOptions options = parameters.front().second.options().dtype(dtype);
    groups[group].options = options;
    for (const auto& [name, piece] : mine) groups[group].pieces.push_back(piece);
    mine.clear();
    for (const auto& [name, p] : parameters) {
      mine.emplace_back(name, torch::empty(p.sizes(), options.device(torch::kMeta)));
    }
  };
  // A rank may hold no piece at all: what the file holds is decided by the run, not by its pieces.
  if (with_ema) stand_in("ema", data.ema, torch::kFloat32);
  for (auto& [group, mine] : data.optimizer) {
    stand_in("optimizer/" + group, mine, parameters.front().second.scalar_type());
  }
  data.fetch = [&plan, &tensors, groups](const std::string& group, size_t index) {
    const Group& g = groups.at(group);
    return optim::gather_param(plan, index, g.pieces, g.options, tensors);
  };
  if (tensors.rank() == 0) return;
  for (const auto& [group, placeholders] : checkpoint::streamed_groups(data)) {
    for (size_t i = 0; i < placeholders->size(); ++i) data.fetch(group, i);
  }
}

}  // namespace

CheckpointWriter::CheckpointWriter(const config::Config& config, std::string vocab_bytes,
                                   std::string lora_base_hash, bool owner)
    : dir_(config.checkpoint.dir),
      keep_last_(config.checkpoint.keep_last),
      config_yaml_(config::to_yaml(config)),
      vocab_bytes_(std::move(vocab_bytes)),
      lora_base_hash_(std::move(lora_base_hash)) {
  if (owner) lock_ = std::make_unique<jobs::JobLock>(jobs::checkpoint_dir_target(dir_));
}

std::string CheckpointWriter::step_path(int64_t step) const {
  return (fs::path(dir_) / checkpoint::step_file_name(step)).string();
}

void CheckpointWriter::save(const RunState& state, parallel::Communicator& comm,
                            parallel::Communicator& tensors) const {
  const auto parameters = checkpoint::trainable_parameters(state.model);
  auto rngs = comm.gather_bytes(dropout_rng_state(parameters.front().second.device()), 0);
  checkpoint::CheckpointData data;
  data.step = state.step;
  data.world_size = comm.size();
  data.model = parameters;
  if (state.ema) data.ema = state.ema->averages();
  data.optimizer = state.adam.state();
  if (state.adam.plan().sharded()) {
    stream_pieces(state.adam.plan(), parameters, state.ema != nullptr, tensors, data);
  }
  if (comm.rank() != 0) return;
  data.optimizer_step = state.adam.step_count();
  data.schedule = {{"lr", state.lr}};
  data.data_epoch = state.position.epoch;
  data.data_next_batch = state.position.next_batch;
  data.rng = std::move(rngs);
  data.config_yaml = config_yaml_;
  data.validation = state.validation;
  data.vocab = vocab_bytes_;
  data.lora_base_hash = lora_base_hash_;
  const std::string path = step_path(state.step);
  checkpoint::save(path, data);
  link_as(path, dir_, "last.h5");
  checkpoint::prune(dir_, keep_last_);
  log::info("saved " + path + " (step " + std::to_string(state.step) + ")");
}

void CheckpointWriter::link_best(int64_t step) const { link_as(step_path(step), dir_, "best.h5"); }

}  // namespace tandem::train
