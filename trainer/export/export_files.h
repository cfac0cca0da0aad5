// What every exported model folder holds besides its weights: where they came from (tandem.json),
// written as text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tandem::exporter {

// Where an export's weights came from.
struct Provenance {
  std::string checkpoint;
  int64_t step = 0;
  bool averaged = false;  // the weights are the checkpoint's moving average
};

// tandem.json's common part: the checkpoint, its step and which weights, and tandem-decode's
// defaults (beam, length penalty, the a · length + b limit, the minimum length).
nlohmann::json provenance_json(const Provenance& provenance);

// `text` into the file at `path`; std::runtime_error naming it when it cannot be written.
void write_text(const std::string& path, const std::string& text);

}  // namespace tandem::exporter
