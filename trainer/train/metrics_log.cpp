#include "trainer/train/metrics_log.h"

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include "trainer/common/atomic_file.h"
#include "trainer/common/log.h"
#include "trainer/jobs/restart_record.h"
#include "trainer/tensorboard/event_file.h"

namespace tandem::train {
namespace {

constexpr const char* kTensorboardKey = "log.tensorboard_dir";

// Keeps the lines of `path` whose step is <= max_step; rewrites the file atomically.
void truncate_after(const std::string& path, int64_t max_step) {
  std::ifstream in(path);
  if (!in) return;
  std::string kept;
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.value("step", int64_t{0}) <= max_step) kept += line + '\n';
  }
  in.close();
  write_file_atomically(path, kept);
}

std::string section_of(const nlohmann::json& record) {
  if (record.contains("event") && record["event"].is_string()) return record["event"];
  for (const auto& item : record.items()) {
    if (item.key().rfind("valid_", 0) == 0) return "valid";
  }
  return "train";
}

}  // namespace

MetricsOutputs metrics_outputs(const config::Config& config) {
  MetricsOutputs outputs;
  outputs.jsonl = (std::filesystem::path(config.checkpoint.dir) / "metrics.jsonl").string();
  if (config.log.tensorboard) {
    outputs.tensorboard_dir =
        config.log.tensorboard_dir.empty() ? config.checkpoint.dir : config.log.tensorboard_dir;
  }
  return outputs;
}

void require_writable(const MetricsOutputs& outputs) {
  if (!outputs.tensorboard_dir.empty()) {
    require_writable_folder(outputs.tensorboard_dir, kTensorboardKey);
  }
}

std::vector<std::pair<std::string, double>> tensorboard_scalars(const nlohmann::json& record) {
  const std::string section = section_of(record);
  const std::string own_prefix = section + "_";
  std::vector<std::pair<std::string, double>> scalars;
  for (const auto& item : record.items()) {
    if (item.key() == "step" || !item.value().is_number()) continue;
    std::string key = item.key();
    if (key.rfind(own_prefix, 0) == 0) key = key.substr(own_prefix.size());
    scalars.emplace_back(section + "/" + key, item.value().get<double>());
  }
  return scalars;
}

MetricsLog::MetricsLog(MetricsOutputs outputs, int64_t resumed_step)
    : outputs_(std::move(outputs)) {
  truncate_after(outputs_.jsonl, resumed_step);
  out_.open(outputs_.jsonl, std::ios::app);
  if (!out_) throw std::runtime_error("metrics: cannot open '" + outputs_.jsonl + "' for writing");
  if (!outputs_.tensorboard_dir.empty()) {
    events_ = std::make_unique<EventFile>(outputs_.tensorboard_dir, kTensorboardKey);
    events_->start_session(resumed_step + 1);
  }
}

MetricsLog::~MetricsLog() = default;

template <class Write>
void MetricsLog::to_events(Write&& write) {
  if (!events_) return;
  try {
    write(*events_);
  } catch (const std::exception& e) {
    log::warn(std::string(e.what()) + "; no more TensorBoard events this run (metrics.jsonl " +
              "goes on)");
    events_.reset();
  }
}

void MetricsLog::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
  const int64_t step = record.value("step", int64_t{0});
  to_events([&](EventFile& events) { events.scalars(step, tensorboard_scalars(record)); });
}

void MetricsLog::text(int64_t step, const std::string& tag, const std::string& markdown) {
  to_events([&](EventFile& events) { events.text(step, tag, markdown); });
}

void append_metrics_record(const MetricsOutputs& outputs, const nlohmann::json& record) {
  {
    std::ofstream out(outputs.jsonl, std::ios::app);
    out << record.dump() << '\n';
    out.flush();
    if (!out) throw std::runtime_error("metrics: cannot append to '" + outputs.jsonl + "'");
  }
  if (outputs.tensorboard_dir.empty()) return;
  try {
    EventFile events(outputs.tensorboard_dir, kTensorboardKey);
    const int64_t step = record.value("step", int64_t{0});
    events.scalars(step, tensorboard_scalars(record));
    if (section_of(record) == "restart") {
      const jobs::RestartRecord restart = jobs::RestartRecord::from_json(record);
      const int64_t accum_steps = restart.settings.value("accum_steps", int64_t{1});
      events.text(step, "restarts",
                  restart.text(", " + std::to_string(accum_steps) + " accumulation step(s)"));
    }
  } catch (const std::exception& e) {
    log::warn(std::string(e.what()) + " (the record is in '" + outputs.jsonl + "')");
  }
}

}  // namespace tandem::train
