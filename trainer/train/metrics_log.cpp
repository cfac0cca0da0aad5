#include "trainer/train/metrics_log.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

namespace tandem::train {
namespace {

// Keeps the lines of `path` whose step is <= max_step; rewrites the file atomically.
void truncate_after(const std::string& path, int64_t max_step) {
  std::ifstream in(path);
  if (!in) return;
  std::vector<std::string> kept;
  for (std::string line; std::getline(in, line);) {
    auto record = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (record.is_object() && record.value("step", int64_t{0}) <= max_step) kept.push_back(line);
  }
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& line : kept) out << line << '\n';
  }
  std::rename(tmp.c_str(), path.c_str());
}

}  // namespace

MetricsLog::MetricsLog(std::string path, int64_t resumed_step) : path_(std::move(path)) {
  truncate_after(path_, resumed_step);
  out_.open(path_, std::ios::app);
  if (!out_) throw std::runtime_error("metrics: cannot open '" + path_ + "' for writing");
}

void MetricsLog::write(const nlohmann::json& record) {
  out_ << record.dump() << '\n';
  out_.flush();
}

void append_metrics_record(const std::string& path, const nlohmann::json& record) {
  std::ofstream out(path, std::ios::app);
  out << record.dump() << '\n';
  out.flush();
  if (!out) throw std::runtime_error("metrics: cannot append to '" + path + "'");
}

}  // namespace tandem::train
