// What a chunked job is, as its parts folder and its finished output record it: the tool, the
// content of its inputs, its models, the options that shape its output, and the chunking. A
// resume, or a rerun of a finished job, goes ahead only where the recorded job and the asked one
// are the same; `difference` says what differs. The paths are kept for the messages: content
// decides (a moved input, or a copied checkpoint, is the same job).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "trainer/bulk/line_chunks.h"

namespace tandem::bulk {

struct InputIdentity {
  std::string path;
  int64_t lines = 0;
  uint64_t bytes = 0;
  uint64_t hash = 0;  // LineChunks::hash
};

struct ModelIdentity {
  std::string path;
  int64_t step = 0;
  std::string created;  // the checkpoint's creation time (ISO 8601)
  uint64_t bytes = 0;   // the file's size
};

struct JobRecord {
  std::string tool;  // "tandem-decode", "tandem-score"
  std::vector<InputIdentity> inputs;
  std::vector<ModelIdentity> models;
  // The options that shape the output, as flag and value ("--beam", "4"), in a fixed order.
  std::vector<std::pair<std::string, std::string>> options;
  int64_t chunk_lines = 0;

  nlohmann::json to_json() const;
  // std::invalid_argument naming `source` for JSON that to_json could not have written.
  static JobRecord from_json(const nlohmann::json& json, const std::string& source);
};

InputIdentity input_identity(const LineChunks& file);

// The checkpoint at `path` as a job records it (its description only: no tensor is read);
// std::invalid_argument naming it when it cannot be read.
ModelIdentity model_identity(const std::string& path);

// "" when `asked` is the job `recorded` is; otherwise the first thing that differs, in words:
// "--beam 4 (recorded: 1)", "the input 'mono.es' has other content (recorded: 2000 lines, 61234
// bytes; now 2001 lines, 61290 bytes)".
std::string difference(const JobRecord& recorded, const JobRecord& asked);

}  // namespace tandem::bulk
