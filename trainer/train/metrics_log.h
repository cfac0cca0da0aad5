// The training metrics file: one JSON object per line (step, epoch, loss, lr, ...), appended by
// rank 0. On resume, records past the resumed step are dropped so the file tells one history.
#pragma once

#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace tandem::train {

class MetricsLog {
 public:
  // Opens `path` for appending, first removing records whose "step" is greater than
  // `resumed_step` (0 on a fresh start: only records of step 0 stay, such as the launcher's
  // record of a restart from scratch).
  MetricsLog(std::string path, int64_t resumed_step);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

// Appends one record to the metrics file at `path` (the launcher's restart records, written
// between two runs of a job); std::runtime_error naming the path when it cannot.
void append_metrics_record(const std::string& path, const nlohmann::json& record);

}  // namespace tandem::train
