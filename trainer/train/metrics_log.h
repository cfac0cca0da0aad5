// The training metrics file: one JSON object per line (step, epoch, loss, lr, ...), appended by
// rank 0. On resume, records past the resumed step are dropped so the file tells one history.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>

namespace tandem::train {

class MetricsLog {
 public:
  // Opens `path` for appending, first removing records whose "step" is greater than
  // `resumed_step` (pass 0 on a fresh start to begin an empty file).
  MetricsLog(std::string path, int64_t resumed_step);
  void write(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

}  // namespace tandem::train
