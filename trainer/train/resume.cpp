#include "trainer/train/resume.h"

#include <torch/cuda.h>

#include <map>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/checkpoint/model_io.h"
#include "trainer/common/log.h"
#include "trainer/config/config.h"
#include "trainer/optim/shard_exchange.h"
#include "trainer/train/rng.h"

namespace tandem::train {
namespace {

std::string encode(const ResumePoint& p) {
  nlohmann::json rng = nlohmann::json::array();
  for (const auto& state : p.rng)
    rng.push_back(nlohmann::json::binary({state.begin(), state.end()}));
  const nlohmann::json j{{"step", p.step},
                         {"world_size", p.world_size},
                         {"epoch", p.position.epoch},
                         {"next_batch", p.position.next_batch},
                         {"optimizer_step", p.optimizer_step},
                         {"rng", rng},
                         {"validation", p.validation},
                         {"average_continues", p.average_continues}};
  const auto bytes = nlohmann::json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
}

ResumePoint decode(const std::string& bytes) {
  const auto j = nlohmann::json::from_cbor(bytes);
  ResumePoint p{j.at("step"),
                j.at("world_size"),
                {j.at("epoch"), j.at("next_batch")},
                j.at("optimizer_step"),
                {},
                j.at("validation"),
                j.at("average_continues")};
  for (const auto& state : j.at("rng")) {
    const auto& b = state.get_binary();
    p.rng.emplace_back(b.begin(), b.end());
  }
  return p;
}

std::string describe(const model::TransformerOptions& o) {
  return std::string("model.activation ") +
         (o.activation == model::Activation::kSwish ? "swish" : "relu") + ", model.positions " +
         (o.positions == model::PositionLayout::kHalves ? "halves" : "interleaved");
}

// What the parameters' names and shapes do not show: the checkpoint's model must compute what this
// run's does, or its weights would be trained as another function.
void check_same_function(const std::string& path, const std::string& config_yaml,
                         const model::TransformerOptions& run) {
  const auto saved = checkpoint::model_options(
      config::parse_config(config_yaml, "checkpoint '" + path + "' /config").model, 0);
  if (saved.activation != run.activation || saved.positions != run.positions) {
    throw std::invalid_argument("checkpoint '" + path + "' was trained with " + describe(saved) +
                                "; this run's config says " + describe(run));
  }
}

// Rank 0: the file, checked, into the model; what else the other ranks need. `data` keeps the
// optimizer's state and the average for the ranks that hold their pieces.
ResumePoint read_on_root(const std::string& path, const ResumeOptions& options,
                         const ResumeTarget& target, checkpoint::CheckpointData& data) {
  data = checkpoint::load(path);
  if (data.vocab != target.corpus.vocab().bytes()) {
    throw std::invalid_argument("checkpoint '" + path + "': its vocabulary differs from corpus '" +
                                target.corpus.path() + "' (token ids would mean other pieces)");
  }
  check_same_function(path, data.config_yaml, target.model->options());
  checkpoint::load_parameters(target.model, data.model, path);
  if (!options.reset_optimizer && data.optimizer.empty()) {
    throw std::invalid_argument("checkpoint '" + path +
                                "' holds no optimizer state (an averaged checkpoint?); resume from "
                                "it with --reset-optimizer");
  }
  if (!options.reset_optimizer) target.adam.load_state(data.optimizer, data.optimizer_step);
  const bool average_continues = target.ema && !options.reset_optimizer && !data.ema.empty();
  if (average_continues) {
    checkpoint::check_compatible(path + " /ema", data.ema,
                                 checkpoint::named_parameters(target.model));
  } else if (target.ema) {
    log::info(std::string("the weights' moving average starts from the checkpoint's weights (") +
              (data.ema.empty() ? "it holds no average" : "optimizer reset") + ")");
  }
  for (size_t rank = 0; rank < data.rng.size(); ++rank) {
    try {
      check_dropout_rng_state(data.rng[rank]);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("checkpoint '" + path + "' /rng/rank_" + std::to_string(rank) +
                                  ": " + e.what());
    }
  }
  return ResumePoint{
      data.step,           data.world_size,     {data.data_epoch, data.data_next_batch},
      data.optimizer_step, std::move(data.rng), std::move(data.validation),
      average_continues};
}

// The saved tensors in the model's parameter order (names checked before).
std::vector<torch::Tensor> in_parameter_order(const checkpoint::NamedTensors& saved,
                                              const checkpoint::NamedTensors& params) {
  const std::map<std::string, torch::Tensor> by_name(saved.begin(), saved.end());
  std::vector<torch::Tensor> ordered;
  for (const auto& [name, param] : params) ordered.push_back(by_name.at(name));
  return ordered;
}

std::vector<torch::Tensor> tensors_of(const checkpoint::NamedTensors& named) {
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  return tensors;
}

// Rank 0's parameters to every rank, and the pieces of the optimizer state and the average to the
// ranks that keep them (every rank, unless the state is sharded), in place.
void distribute(const ResumeTarget& target, const ResumePoint& point,
                const checkpoint::CheckpointData& data, bool reset_optimizer,
                parallel::Communicator& tensors) {
  torch::NoGradGuard no_grad;
  auto params = checkpoint::named_parameters(target.model);
  for (auto& [name, p] : params) tensors.broadcast(p, 0);
  const optim::ShardPlan& plan = target.adam.plan();
  const bool root = tensors.rank() == 0;
  const torch::TensorOptions param_type = params.front().second.options();
  if (target.ema && point.average_continues) {
    optim::scatter_whole(
        plan, root ? in_parameter_order(data.ema, params) : std::vector<torch::Tensor>{},
        tensors_of(target.ema->averages()), param_type.dtype(torch::kFloat32), tensors);
  } else if (target.ema) {
    target.ema->reset();  // from the weights just received
  }
  if (reset_optimizer) return;
  for (const auto& [group, pieces] : target.adam.state()) {
    optim::scatter_whole(
        plan,
        root ? in_parameter_order(data.optimizer.at(group), params) : std::vector<torch::Tensor>{},
        tensors_of(pieces), param_type, tensors);
  }
  target.adam.set_step_count(point.optimizer_step);
}

}  // namespace

ResumePoint load_everywhere(const std::string& path, const ResumeOptions& options,
                            const ResumeTarget& target, parallel::Communicator& host,
                            parallel::Communicator& tensors) {
  ResumePoint point;
  checkpoint::CheckpointData data;  // rank 0's, until the ranks have their pieces
  if (host.rank() == 0) point = read_on_root(path, options, target, data);
  point = decode(host.broadcast_bytes(encode(point), 0));
  distribute(target, point, data, options.reset_optimizer, tensors);
  return point;
}

void restore_dropout_streams(const ResumePoint& point, uint64_t seed, int rank, int world_size,
                             const torch::Device& device) {
  const bool same_world =
      point.world_size == world_size && static_cast<int64_t>(point.rng.size()) == world_size;
  if (same_world) {
    if (!set_dropout_rng_state(point.rng[rank], device)) {
      // No GPU stream in the checkpoint (written on a CPU): a fresh one, fixed by seed and step.
      torch::cuda::manual_seed_all(dropout_seed(seed, rank) + point.step);
    }
    return;
  }
  torch::manual_seed(dropout_seed(seed, rank) + point.step);
  log::info("checkpoint was written by " + std::to_string(point.world_size) +
            " rank(s), continuing with " + std::to_string(world_size) +
            ": same global batch cursor, dropout streams reseeded");
}

}  // namespace tandem::train
