#include "trainer/train/resume.h"

#include <torch/cuda.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/log.h"
#include "trainer/config/config.h"
#include "trainer/model_io/model_io.h"
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
  const char* positions[] = {"interleaved", "halves", "fairseq"};  // in the enum's order
  return std::string("model.activation ") +
         (o.activation == model::Activation::kSwish ? "swish" : "relu") + ", model.positions " +
         positions[static_cast<int>(o.positions)];
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

// Rank 0: the file checked whole (names, shapes, checksums of the weights), its weights read into
// the model; what else the other ranks need. The optimizer state and the average are read later,
// a tensor at a time, as distribute() hands their pieces out.
ResumePoint read_on_root(const std::string& path, const ResumeOptions& options,
                         const ResumeTarget& target) {
  checkpoint::CheckpointData data = checkpoint::load_outline(path);
  if (data.vocab != target.corpus.vocab().bytes()) {
    throw std::invalid_argument("checkpoint '" + path + "': its vocabulary differs from corpus '" +
                                target.corpus.path() + "' (token ids would mean other pieces)");
  }
  check_same_function(path, data.config_yaml, target.model->options());
  if (data.lora_base_hash != target.lora_base_hash) {
    throw std::invalid_argument(
        "checkpoint '" + path + "' " +
        (data.lora_base_hash.empty() ? std::string("holds no LoRA adapters")
                                     : "holds LoRA adapters trained on a base of content hash " +
                                           data.lora_base_hash) +
        "; this run's " +
        (target.lora_base_hash.empty() ? std::string("config trains without LoRA")
                                       : "base (lora.base) has content hash " +
                                             target.lora_base_hash));
  }
  checkpoint::read_parameters(path, "model", checkpoint::trainable_parameters(target.model));
  if (!options.reset_optimizer && data.optimizer.empty()) {
    throw std::invalid_argument("checkpoint '" + path +
                                "' holds no optimizer state (an averaged checkpoint?); resume from "
                                "it with --reset-optimizer");
  }
  if (!options.reset_optimizer) {
    target.adam.check_state(data.optimizer);
    target.adam.set_step_count(data.optimizer_step);  // checks its range
  }
  const bool average_continues = target.ema && !options.reset_optimizer && !data.ema.empty();
  if (average_continues) {
    checkpoint::check_compatible(path + " /ema", data.ema,
                                 checkpoint::trainable_parameters(target.model));
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

std::vector<torch::Tensor> tensors_of(const checkpoint::NamedTensors& named) {
  std::vector<torch::Tensor> tensors;
  for (const auto& [name, tensor] : named) tensors.push_back(tensor);
  return tensors;
}

// Group `group` of the file ("ema", "optimizer/exp_avg"), read by rank 0 a tensor at a time, into
// the pieces each rank keeps (`pieces`, of type `options`).
void scatter_group(const std::string& path, const std::string& group, const ResumeTarget& target,
                   const checkpoint::NamedTensors& pieces, const torch::TensorOptions& options,
                   parallel::Communicator& tensors) {
  const auto params = checkpoint::trainable_parameters(target.model);
  const std::vector<torch::Tensor> mine = tensors_of(pieces);
  std::unique_ptr<checkpoint::GroupReader> file;  // rank 0's
  if (tensors.rank() == 0) file = std::make_unique<checkpoint::GroupReader>(path, group);
  for (size_t i = 0; i < params.size(); ++i) {
    const torch::Tensor whole = file ? file->read(params[i].first) : torch::Tensor();
    optim::scatter_param(target.adam.plan(), i, whole, mine, options, tensors);
  }
}

// Rank 0's parameters to every rank, and the pieces of the optimizer state and the average to the
// ranks that keep them (every rank, unless the state is sharded), in place.
void distribute(const std::string& path, const ResumeTarget& target, const ResumePoint& point,
                bool reset_optimizer, parallel::Communicator& tensors) {
  torch::NoGradGuard no_grad;
  auto params = checkpoint::trainable_parameters(target.model);
  for (auto& [name, p] : params) tensors.broadcast(p, 0);
  const torch::TensorOptions param_type = params.front().second.options();
  if (target.ema && point.average_continues) {
    scatter_group(path, "ema", target, target.ema->averages(), param_type.dtype(torch::kFloat32),
                  tensors);
  } else if (target.ema) {
    target.ema->reset();  // from the weights just received
  }
  if (reset_optimizer) return;
  for (const auto& [group, pieces] : target.adam.state()) {
    scatter_group(path, "optimizer/" + group, target, pieces, param_type, tensors);
  }
  target.adam.set_step_count(point.optimizer_step);
}

}  // namespace

ResumePoint load_everywhere(const std::string& path, const ResumeOptions& options,
                            const ResumeTarget& target, parallel::Communicator& host,
                            parallel::Communicator& tensors) {
  ResumePoint point;
  if (host.rank() == 0) point = read_on_root(path, options, target);
  point = decode(host.broadcast_bytes(encode(point), 0));
  distribute(path, target, point, options.reset_optimizer, tensors);
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
