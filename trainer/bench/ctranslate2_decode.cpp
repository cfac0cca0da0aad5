#include "trainer/bench/ctranslate2_decode.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "trainer/common/token_ids.h"
#include "trainer/jobs/process.h"

namespace tandem::bench {
namespace {

// Sentences the script translates untimed before its timed run.
constexpr int64_t kWarmupSentences = 100;

bool is_file(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// The sentences as the script reads them with --pieces: each id's piece, space-separated.
void write_pieces(const std::string& path, const data::Vocab& vocab,
                  const std::vector<std::vector<int32_t>>& sources) {
  std::ofstream out(path);
  for (const auto& ids : sources) {
    for (size_t i = 0; i < ids.size(); ++i) out << (i ? " " : "") << vocab.piece(ids[i]);
    out << '\n';
  }
  if (!out) throw std::runtime_error("cannot write '" + path + "'");
}

std::vector<std::vector<int32_t>> read_pieces(const std::string& path, const data::Vocab& vocab) {
  std::unordered_map<std::string, int32_t> ids;
  for (int32_t id = 0; id < vocab.size(); ++id) ids.emplace(vocab.piece(id), id);
  std::ifstream in(path);
  std::vector<std::vector<int32_t>> out;
  for (std::string line; std::getline(in, line);) {
    std::istringstream pieces(line);
    out.emplace_back();
    for (std::string piece; pieces >> piece;) {
      const auto it = ids.find(piece);
      out.back().push_back(it == ids.end() ? static_cast<int32_t>(kUnkId) : it->second);
    }
  }
  return out;
}

nlohmann::json last_record(const std::string& output_path) {
  std::ifstream in(output_path);
  nlohmann::json record;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.front() == '{') record = nlohmann::json::parse(line, nullptr, false);
    else std::printf("  ctranslate2: %s\n", line.c_str());
  }
  return record;
}

}  // namespace

void check_ctranslate2(const Ct2DecodeOptions& options) {
  if (!is_file(options.model_dir + "/model.bin")) {
    throw std::invalid_argument("--ctranslate2 '" + options.model_dir +
                                "': no model.bin there; give a folder tandem-export --to "
                                "ctranslate2 wrote from the same checkpoint");
  }
  if (!is_file(options.script)) {
    throw std::invalid_argument("the CTranslate2 decoding script '" + options.script +
                                "' is missing (launch/ctranslate2-decode.py of the source tree)");
  }
}

Timing timed_ctranslate2(const Ct2DecodeOptions& options, const data::Vocab& vocab,
                         const std::vector<std::vector<int32_t>>& sources,
                         const std::string& precision, int threads,
                         const decode::DecodeOptions& decode, int64_t max_positions,
                         const std::string& work_dir) {
  if (decode.max_len_a != 0) {
    throw std::invalid_argument("CTranslate2 decodes to a fixed length: max_len_a must be 0");
  }
  const std::string input = work_dir + "/ct2-input.pieces", output = work_dir + "/ct2-output.pieces";
  const std::string log = work_dir + "/ct2.out";
  write_pieces(input, vocab, sources);
  std::vector<std::string> command = {
      options.python, options.script, options.model_dir, input, output, "--pieces",
      "--beam", std::to_string(decode.beam_size), "--lenpen", std::to_string(decode.length_penalty),
      "--min-len", std::to_string(decode.min_len), "--max-len", std::to_string(decode.max_len_b),
      "--max-input-len", std::to_string(max_positions),
      "--compute-type", precision == "int8" ? "int8" : "float32",
      "--threads", std::to_string(threads), "--batch-tokens", std::to_string(decode.batch_tokens),
      "--repeat", "1", "--warmup", std::to_string(kWarmupSentences)};
  if (options.use_vmap) command.push_back("--use-vmap");
  const int code = jobs::run_process(command, log);
  const nlohmann::json record = last_record(log);
  if (code != 0 || !record.is_object() || !record.contains("wall_s")) {
    throw std::runtime_error("CTranslate2's decoding script exited with code " +
                             std::to_string(code) + " without its JSON line (" + log +
                             " above; is ctranslate2 on PYTHONPATH? launch/ctranslate2.sh)");
  }
  Timing timing;
  timing.wall = record.at("wall_s").get<double>();
  timing.user = record.at("user_s").get<double>();
  timing.sys = record.at("sys_s").get<double>();
  count_outputs(timing, vocab, read_pieces(output, vocab));
  return timing;
}

}  // namespace tandem::bench
