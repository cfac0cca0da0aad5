// What a checkpoint holds, in memory (CheckpointData), and the format's name and version: what
// the file's writers and readers (checkpoint.h, atomic_write.h, tensor_io.h) share.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tandem::checkpoint {

constexpr const char* kFormatName = "tandem-checkpoint";
constexpr int64_t kFormatVersion = 1;

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

// Where a save may take a group's tensors one at a time: `group` is "model", "ema" or
// "optimizer/<group>", `index` the tensor's place in it (streamed_groups() gives the order).
using TensorFetch = std::function<torch::Tensor(const std::string& group, size_t index)>;

struct CheckpointData {
  int64_t step = 0;
  int64_t world_size = 1;
  NamedTensors model;      // parameter name → tensor (CPU, any float/int dtype)
  NamedTensors ema;        // parameter name → its moving average; empty if none
  bool holds_ema = false;  // the file has /ema (set by the readers)
  std::map<std::string, NamedTensors> optimizer;  // group ("exp_avg", ...) → param name → tensor
  int64_t optimizer_step = 0;
  std::map<std::string, double> schedule;  // LR schedule state, e.g. {"last_lr": ...}
  int64_t data_epoch = 0;
  int64_t data_next_batch = 0;
  std::vector<std::string> rng;  // one opaque state per rank, rank order
  std::string config_yaml;
  std::string validation;                  // JSON text, "" when the run did not validate
  std::string vocab;                       // the vocabulary's bytes (data::Vocab::bytes())
  std::string torch_version;               // filled by save() when empty
  std::string created;                     // filled by save() when empty
  std::vector<std::string> averaged_from;  // inputs of an averaged checkpoint; empty otherwise
  std::string lora_base_hash;              // a LoRA checkpoint's base's content; empty otherwise
  // When set, the groups that hold placeholders (meta tensors: names, shapes and types) have
  // their tensors asked of `fetch`, each just before save() writes it, then let go: the whole
  // state is never in memory at once (a sharded optimizer's `ema` and `optimizer`, gathered piece
  // by piece; an import's `model`, read a tensor at a time).
  TensorFetch fetch;
};

}  // namespace tandem::checkpoint
