// The training metrics: one JSON object per line in metrics.jsonl (step, epoch, loss, lr, ...),
// and the same numbers as TensorBoard scalars in event files (log.tensorboard), both written by
// rank 0. On resume, records past the resumed step are dropped from metrics.jsonl, and a session
// start in a new event file makes TensorBoard drop them too, so both tell one history.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "trainer/config/config.h"

namespace tandem::train {

class EventFile;

struct MetricsOutputs {
  std::string jsonl;            // <checkpoint.dir>/metrics.jsonl
  std::string tensorboard_dir;  // where event files go; empty: none (log.tensorboard false)
};

// The outputs a config names: log.tensorboard_dir, or checkpoint.dir when that is empty.
MetricsOutputs metrics_outputs(const config::Config& config);

// Creates the event files' folder and checks that a file can be written there, before training
// starts; std::invalid_argument naming log.tensorboard_dir and the folder otherwise. Nothing
// without event files.
void require_writable(const MetricsOutputs& outputs);

// A record's numbers as TensorBoard scalars: every number but "step", tagged
// "<section>/<key>" with the section's own prefix taken off the key. The section is the record's
// "event" ("restart/world_size"), else "valid" for validation records ("valid/bleu" from
// "valid_bleu"), else "train" ("train/loss").
std::vector<std::pair<std::string, double>> tensorboard_scalars(const nlohmann::json& record);

class MetricsLog {
 public:
  // Opens metrics.jsonl for appending, first removing records whose "step" is greater than
  // `resumed_step` (0 on a fresh start: only records of step 0 stay, such as the launcher's
  // record of a restart from scratch), and starts a new event file whose session starts at
  // `resumed_step` + 1. Throws std::invalid_argument naming log.tensorboard_dir when the event
  // file cannot be made.
  MetricsLog(MetricsOutputs outputs, int64_t resumed_step);
  ~MetricsLog();
  // One record: a line of metrics.jsonl and its scalars at its "step".
  void write(const nlohmann::json& record);
  // Markdown for TensorBoard's text dashboard only (sample translations, the config).
  void text(int64_t step, const std::string& tag, const std::string& markdown);
  const std::string& path() const { return outputs_.jsonl; }

 private:
  // Runs `write` on the event file; a failure (a full disk) is reported once and ends the event
  // file, not the training: metrics.jsonl goes on.
  template <class Write>
  void to_events(Write&& write);

  MetricsOutputs outputs_;
  std::ofstream out_;
  std::unique_ptr<EventFile> events_;
};

// Appends one record to metrics.jsonl and, as scalars and a text line, to a new event file (the
// launcher's restart records, written between two runs of a job). std::runtime_error naming
// metrics.jsonl when it cannot append there; an event file that cannot be written is a warning.
void append_metrics_record(const MetricsOutputs& outputs, const nlohmann::json& record);

}  // namespace tandem::train
