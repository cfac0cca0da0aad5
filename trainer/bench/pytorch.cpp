#include "trainer/bench/pytorch.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <stdexcept>

#include "trainer/jobs/mpirun_command.h"
#include "trainer/jobs/process.h"

namespace tandem::bench {
namespace {

namespace fs = std::filesystem;

// The shapes ref_train.py knows (its SHAPES table), by the REF_SHAPE name that selects them.
std::string shape_name(const config::ModelConfig& m) {
  struct Shape {
    const char* name;
    int64_t d_model, heads, layers, d_ff;
  };
  for (const Shape& s : {Shape{"tiny", 256, 4, 3, 1024}, Shape{"base", 512, 8, 6, 2048}}) {
    if (m.d_model == s.d_model && m.heads == s.heads && m.encoder_layers == s.layers &&
        m.decoder_layers == s.layers && m.d_ff == s.d_ff) {
      return s.name;
    }
  }
  return "";
}

void require_file(const std::string& path, const std::string& flag, const std::string& hint) {
  if (!fs::is_regular_file(path)) {
    throw std::invalid_argument(flag + " '" + path + "': no such file; " + hint);
  }
}

// train.en (source) and train.es (target) from the corpus's train split, decoded with its own
// vocabulary, read in slices so that this process never holds the whole split.
void export_text(const data::Corpus& corpus, const std::string& dir) {
  constexpr int64_t kSlice = 20000;
  const auto vocab = corpus.vocab();
  std::ofstream src(dir + "/train.en"), tgt(dir + "/train.es");
  const int64_t n = corpus.size("train");
  for (int64_t begin = 0; begin < n; begin += kSlice) {
    std::vector<int64_t> indices(std::min(kSlice, n - begin));
    std::iota(indices.begin(), indices.end(), begin);
    for (const auto& pair : corpus.read("train", indices)) {
      src << vocab.decode(pair.src, data::Side::kSource) << '\n';
      tgt << vocab.decode(pair.tgt, data::Side::kTarget) << '\n';
    }
  }
  if (!src || !tgt) throw std::runtime_error("cannot write the yardstick's text into " + dir);
}

void set_env(const std::string& name, const std::string& value) {
  setenv(name.c_str(), value.c_str(), 1);
}

// The command line (with what mpirun itself needs in its environment), the script's settings in
// this process's environment (mpirun passes them on with -x).
jobs::MpirunCommand yardstick_command(const YardstickOptions& options, const config::Config& config,
                                      int64_t vocab_size, const std::string& data_dir,
                                      const std::string& spm) {
  const std::string threads = std::to_string(options.threads);
  set_env("OMP_NUM_THREADS", threads);
  set_env("OPENBLAS_NUM_THREADS", threads);
  set_env("REF_THREADS", threads);
  set_env("REF_TOKENS", std::to_string(config.data.max_tokens));
  set_env("REF_VOCAB", std::to_string(vocab_size));
  set_env("REF_SHAPE", shape_name(config.model));
  set_env("REF_DEVICE", options.cuda ? "cuda" : "cpu");
  set_env("REF_AMP", options.precision == "bf16" ? "bf16" : "");
  set_env("REF_SDPA", options.cuda ? "1" : "0");  // PyTorch's fused attention where it has one
  set_env("MASTER_ADDR", "127.0.0.1");
  // A free port rather than the script's fixed default: others may run it on this machine too.
  set_env("MASTER_PORT", std::to_string(jobs::free_local_port()));
  jobs::MpirunCommand command;
  if (options.ranks > 1) {
    command = jobs::mpirun_command(
        options.ranks, options.threads,
        {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "REF_THREADS", "REF_TOKENS", "REF_VOCAB",
         "REF_SHAPE", "REF_DEVICE", "REF_AMP", "REF_SDPA", "MASTER_ADDR", "MASTER_PORT"});
  } else {
    unsetenv("OMPI_COMM_WORLD_RANK");  // alone: the script must see a world of one
    unsetenv("OMPI_COMM_WORLD_SIZE");
  }
  command.argv.insert(command.argv.end(), {options.python, options.script, data_dir, spm,
                                           std::to_string(options.steps)});
  return command;
}

// Echoes what the script printed and parses its last JSON line (null when there is none).
nlohmann::json read_record(const std::string& output_path) {
  std::ifstream in(output_path);
  nlohmann::json record;
  for (std::string line; std::getline(in, line);) {
    std::printf("  yardstick: %s\n", line.c_str());
    if (!line.empty() && line.front() == '{') record = nlohmann::json::parse(line, nullptr, false);
  }
  return record;
}

}  // namespace

void check_yardstick(const YardstickOptions& options, const config::ModelConfig& model) {
  require_file(
      options.script, "--pytorch-script",
      "give the path of ref_train.py (it lives in ../shared/bench/ beside the repository on "
      "developer and CI machines)");
  require_file(options.python, "--pytorch-python", "it needs python3 with torch and sentencepiece");
  if (!options.data_dir.empty()) {
    require_file(options.data_dir + "/train.en", "--pytorch-data",
                 "expected train.en and train.es there");
    require_file(options.data_dir + "/train.es", "--pytorch-data",
                 "expected train.en and train.es there");
  }
  if (!options.spm.empty())
    require_file(options.spm, "--pytorch-spm", "expected a SentencePiece model");
  if (shape_name(model).empty()) {
    throw std::invalid_argument(
        "--pytorch: the yardstick knows only the tiny (d_model 256, heads 4, 3+3 layers, d_ff "
        "1024) "
        "and base (512, 8, 6+6, 2048) shapes; model d_model " +
        std::to_string(model.d_model) + " is neither");
  }
}

std::vector<std::string> yardstick_differences(const config::Config& config) {
  std::vector<std::string> out;
  if (config.model.pre_norm) out.push_back("model.pre_norm is true; the yardstick is post-norm");
  if (config.model.activation != config::Activation::kRelu)
    out.push_back("model.activation is not relu, the yardstick's");
  if (config.model.positions != config::PositionLayout::kInterleaved)
    out.push_back("model.positions is not interleaved, the yardstick's");
  if (config.model.tie_embeddings)
    out.push_back("model.tie_embeddings is true; the yardstick's are untied");
  if (config.model.dropout != 0.1) out.push_back("model.dropout is not the yardstick's 0.1");
  if (config.train.label_smoothing != 0)
    out.push_back("train.label_smoothing is on; the yardstick has none");
  if (config.train.accum_steps != 1) out.push_back("train.accum_steps is not the yardstick's 1");
  return out;
}

YardstickResult run_yardstick(const YardstickOptions& options, const config::Config& config,
                              const data::Corpus& corpus, const std::string& work_dir) {
  YardstickResult result;
  std::string data_dir = options.data_dir, spm = options.spm;
  const auto vocab = corpus.vocab();
  if (vocab.paired()) {
    throw std::invalid_argument(
        "--pytorch: the yardstick tokenizes with one SentencePiece model; '" + corpus.path() +
        "' has a paired vocabulary (one per side)");
  }
  if (data_dir.empty()) {
    data_dir = work_dir;
    export_text(corpus, data_dir);
    result.reencoded = true;
  }
  if (spm.empty()) {
    spm = work_dir + "/spm.model";
    std::ofstream(spm, std::ios::binary) << vocab.sentencepiece_bytes(data::Side::kSource);
  }
  const auto command = yardstick_command(options, config, vocab.size(), data_dir, spm);
  const std::string output = work_dir + "/yardstick.out";
  const int code = jobs::run_process(command.argv, output, command.environment);
  result.record = read_record(output);
  if (code != 0)
    throw std::runtime_error("the PyTorch yardstick exited with code " + std::to_string(code));
  if (!result.record.is_object() || !result.record.contains("tgt_tokens_per_s")) {
    throw std::runtime_error("the PyTorch yardstick printed no JSON line with tgt_tokens_per_s");
  }
  result.tgt_tokens_per_s = result.record.at("tgt_tokens_per_s").get<double>();
  result.rank0_peak_rss_mb = result.record.value("rank0_peak_rss_mb", 0.0);
  return result;
}

}  // namespace tandem::bench
