#include "trainer/export/export_files.h"

#include <fstream>
#include <stdexcept>

#include "trainer/decode/decode_options.h"

namespace tandem::exporter {

nlohmann::json provenance_json(const Provenance& p) {
  const decode::DecodeOptions defaults;
  return {{"checkpoint", p.checkpoint},
          {"step", p.step},
          {"weights", p.averaged ? "averaged" : "raw"},
          {"tandem_decode_defaults",
           {{"beam_size", defaults.beam_size},
            {"length_penalty", defaults.length_penalty},
            {"max_len_a", defaults.max_len_a},
            {"max_len_b", defaults.max_len_b},
            {"min_decoding_length", defaults.min_len}}}};
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

}  // namespace tandem::exporter
