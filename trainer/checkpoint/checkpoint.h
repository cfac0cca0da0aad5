// One self-describing HDF5 file per checkpoint (DESIGN.md › Checkpoints): its layout, and
// saving (atomically) and loading everything a run needs to continue.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "trainer/checkpoint/checkpoint_data.h"

namespace tandem::checkpoint {

// One self-describing HDF5 file per checkpoint (DESIGN.md › Checkpoints):
//   /model/<param name>          float32 datasets, Fletcher32-checksummed (dotted names as-is)
//   /ema/<param name>            the exponential moving average of each parameter (float32); absent
//                                when the run kept none (train.ema_decay 0)
//   /optimizer/<group>/<param>   optimizer state tensors (e.g. exp_avg, exp_avg_sq); attribute step
//   /schedule                    attributes of the LR schedule state
//   /data                        attributes epoch, next_batch
//   /rng/rank_<r>                uint8 RNG state of every rank
//   /config                      the resolved YAML (string)
//   /validation                  JSON (string): validation history and keep-best/early-stopping
//                                state; absent when the run did not validate
//   /vocab                       the vocabulary's bytes (uint8; data/vocab/vocab.h: a SentencePiece
//                                model, or a paired vocabulary)
//   root attributes              format "tandem-checkpoint", format_version, step, world_size,
//                                torch_version, created (ISO 8601 UTC); averaged_from (the input
//                                paths, one per line) only in checkpoints made by tandem-average;
//                                lora_base_hash only in LoRA checkpoints (their /model and /ema
//                                hold the adapters; /config's lora.base names the base, whose
//                                /model has this content hash: model_io.h)
// Writing is atomic: <path>.tmp, flush, close, rename. HDF5 is reached through hdf5/hdf5.h.

// The groups that hold placeholders, whose tensors save() takes from CheckpointData::fetch (and
// that an outline holds), in the order it writes them ("model", "ema", then "optimizer/<group>"
// in the map's order), with their tensors.
std::vector<std::pair<std::string, const NamedTensors*>> streamed_groups(
    const CheckpointData& data);

// Writes atomically; throws std::runtime_error naming the path on failure and leaves any previous
// file at `path` untouched.
void save(const std::string& path, const CheckpointData& data);

// Reads everything. Throws std::invalid_argument with one line naming the path and the problem for:
// missing file, not HDF5, not a Tandem checkpoint (format attribute), unsupported version,
// checksum failure (Fletcher32), missing datasets.
CheckpointData load(const std::string& path);

// The model part (model, EMA, config, vocab, step) without the training state (tandem-average);
// same errors.
CheckpointData load_model_only(const std::string& path);

// What eval/decode need to build the model (config, vocab, step, holds_ema), no tensors; same
// errors. read_parameters then fills the model.
CheckpointData load_description(const std::string& path);

// Everything, with the tensors of /model, /ema and /optimizer as meta tensors (names, shapes and
// types, no values): what a resume checks before it reads the tensors one at a time; same errors.
CheckpointData load_outline(const std::string& path);

// The tensors of one group ("optimizer/exp_avg", "ema") read one at a time, the file opened once:
// what a resume hands out piece by piece without holding the group whole. Same errors as load(),
// from the constructor (a missing file or group) and from read() (a missing or damaged dataset).
class GroupReader {
 public:
  GroupReader(const std::string& path, const std::string& group);
  ~GroupReader();
  GroupReader(const GroupReader&) = delete;
  GroupReader& operator=(const GroupReader&) = delete;

  torch::Tensor read(const std::string& name) const;  // dataset `name` of the group

 private:
  struct Open;  // the open file and group
  std::unique_ptr<Open> open_;
};

// Reads group `group` ("model" or "ema") of `path` straight into `params` (each saved tensor into
// the parameter of its name, without a copy in between where the parameter is a contiguous CPU
// tensor of the saved type), after the check of check_compatible; same errors as load().
void read_parameters(const std::string& path, const std::string& group, const NamedTensors& params);

// The values group `group` ("model" or "ema") holds, all its datasets together; same errors.
int64_t stored_elements(const std::string& path, const std::string& group);

// Compares names and shapes with the model's; throws std::invalid_argument listing the first few
// differences (missing, unexpected, shape a vs b) and the path.
void check_compatible(const std::string& path, const NamedTensors& checkpoint_params,
                      const NamedTensors& model_params);

// Retention in a directory: step-<8 digits>.h5 files and last.h5.
std::string step_file_name(int64_t step);  // "step-00000500.h5"
// Paths of every step-<digits>.h5 in `dir`, highest step first, without opening them (*.tmp
// files are not step files); none when `dir` is missing.
std::vector<std::string> step_files(const std::string& dir);
// The newest complete checkpoint in `dir` (by step in the file name), or "" when none. Cheap:
// a step file counts when its root format attribute reads (truncated and *.tmp files are skipped).
std::string find_latest(const std::string& dir);
// Deletes all but the newest `keep_last` step files (keep_last 0 keeps all).
void prune(const std::string& dir, int64_t keep_last);

}  // namespace tandem::checkpoint
