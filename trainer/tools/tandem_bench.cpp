// tandem-bench: training speed on a corpus. Trainer::train_step() runs W warm-up steps, then K
// timed windows of S steps (a barrier before each clock read, so every rank times the same
// interval). Prints the median window's target tokens/s, model FLOPs per target token and achieved
// FLOP/s, peak RSS per rank, optionally the PyTorch yardstick on the same work and the ratios, and
// ends with one JSON line. With --ranks N > 1 it runs itself under mpirun in a hidden worker mode.
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "data/corpus.h"
#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/common/temp_dir.h"
#include "trainer/config/config.h"
#include "trainer/parallel/process_group.h"
#include "trainer/tools/bench_flops.h"
#include "trainer/tools/bench_pytorch.h"
#include "trainer/tools/launcher.h"
#include "trainer/tools/process.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/trainer.h"

#ifdef TANDEM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace {

namespace cfg = tandem::config;
namespace tools = tandem::tools;
using tandem::TempDir;
using Clock = std::chrono::steady_clock;

constexpr const char* kExamples = R"(Examples:
  tandem-bench --corpus work/bible/corpus.h5 --ranks 1 --threads 1
  tandem-bench --corpus work/bible/corpus.h5 --ranks 2 --warmup 3 --steps 10 --windows 3 --pytorch
  tandem-bench --corpus work/bible/corpus.h5 --set train.precision=bf16 --pytorch --pytorch-precision fp32
  tandem-bench --corpus c.h5 --ranks 2 --config configs/base.yaml --set data.max_tokens=2048
Without --config the model is the tiny shape (d_model 256, 4 heads, 3+3 layers, d_ff 1024, dropout
0.1) with max_tokens 4096 per rank, in fp32. The yardstick runs in Tandem's precision unless
--pytorch-precision says otherwise. The bench sets data.corpus, train.threads, checkpoint.* (a
temporary directory, no saving) and valid.every_steps (0) itself.)";

// Keys the bench owns: --set may not change them (prefixes of the key path).
const std::vector<std::string> kOwnedKeys = {"data.corpus", "train.threads", "checkpoint.",
                                             "valid.every_steps"};

struct Flags {
  std::string corpus, config_path, worker_dir;
  int ranks = 1, threads = 1, warmup = 3, steps = 10, windows = 3;
  bool pytorch = false;
  std::string pytorch_precision;  // "" = the precision Tandem trained in
  double peak_tflops = 0;         // 0: from the device name where known
  std::vector<std::string> overrides;
  std::string profile;  // "": no trace; else a Chrome trace of --steps more steps, rank 0
  tools::YardstickOptions yardstick;
};

struct Measurement {
  std::vector<double> window_tokens, window_seconds;  // global target tokens, seconds per window
  std::vector<double> rss_mb;                         // peak RSS of each rank
  std::vector<double> gpu_mb;  // peak GPU memory LibTorch's allocator handed out, per rank; 0: CPU
  std::string device = "cpu";  // rank 0's, as the trainer describes it
  std::string precision = "fp32";  // what train.precision resolved to

  std::vector<double> rates() const {  // target tokens/s of each window
    std::vector<double> out;
    for (size_t w = 0; w < window_tokens.size(); ++w)
      out.push_back(window_tokens[w] / window_seconds[w]);
    return out;
  }
  double median_tokens_per_s() const {
    auto rates = this->rates();
    std::sort(rates.begin(), rates.end());
    const size_t n = rates.size();
    return n % 2 ? rates[n / 2] : (rates[n / 2 - 1] + rates[n / 2]) / 2;
  }
  double max_rss_mb() const { return *std::max_element(rss_mb.begin(), rss_mb.end()); }
};

nlohmann::json measurement_json(const Measurement& m) {
  return {{"window_tokens", m.window_tokens},
          {"window_seconds", m.window_seconds},
          {"rss_mb", m.rss_mb},
          {"gpu_mb", m.gpu_mb},
          {"device", m.device},
          {"precision", m.precision}};
}

Measurement measurement_from_json(const nlohmann::json& j) {
  return {j.at("window_tokens").get<std::vector<double>>(),
          j.at("window_seconds").get<std::vector<double>>(),
          j.at("rss_mb").get<std::vector<double>>(),
          j.at("gpu_mb").get<std::vector<double>>(),
          j.at("device").get<std::string>(),
          j.at("precision").get<std::string>()};
}

// A path or other string as a YAML scalar for --set (a JSON string is a YAML double-quoted scalar).
std::string assign(const std::string& key, const std::string& value) {
  return key + "=" + nlohmann::json(value).dump();
}

// The tiny shape (configs/tiny.yaml's model section); the rest keeps Config's defaults, which
// match the yardstick's optimiser (Adam 3e-4, constant, clip 1.0, no label smoothing).
std::string tiny_yaml() {
  cfg::Config tiny;
  tiny.model.d_model = 256;
  tiny.model.heads = 4;
  tiny.model.encoder_layers = 3;
  tiny.model.decoder_layers = 3;
  tiny.model.d_ff = 1024;
  tiny.model.dropout = 0.1;
  tiny.data.max_tokens = 4096;
  return cfg::to_yaml(tiny);
}

cfg::Config resolve_config(const Flags& f, const std::string& run_dir) {
  for (const auto& text : f.overrides) {
    for (const auto& key : kOwnedKeys) {
      if (text.rfind(key, 0) == 0) {
        throw std::invalid_argument("--set '" + text + "': the bench sets " + key +
                                    " itself (see --corpus, --threads)");
      }
    }
  }
  std::vector<std::string> sets = {
      assign("data.corpus", f.corpus), "train.threads=" + std::to_string(f.threads),
      assign("checkpoint.dir", run_dir), "checkpoint.every_steps=0", "valid.every_steps=0"};
  sets.insert(sets.end(), f.overrides.begin(), f.overrides.end());
  if (f.config_path.empty())
    return cfg::parse_config(tiny_yaml(), "the built-in tiny config", sets);
  return cfg::load_config(f.config_path, sets);
}

// After the timed windows: --steps more steps under LibTorch's profiler (host operators, and the
// GPU's kernels and copies on CUDA), written by rank 0 as a Chrome trace (launch/profile-summary.py
// totals it).
template <typename Settle>
void profile_steps(tandem::train::Trainer& trainer, const Flags& f, Settle settle, bool write) {
  namespace profiler = torch::autograd::profiler;
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig options(torch::profiler::impl::ProfilerState::KINETO);
  std::set<ActivityType> activities{ActivityType::CPU};
  if (trainer.device().device.is_cuda()) activities.insert(ActivityType::CUDA);
  settle();
  profiler::prepareProfiler(options, activities);
  profiler::enableProfiler(options, activities);
  for (int s = 0; s < f.steps; ++s) trainer.train_step();
  settle();
  const auto result = profiler::disableProfiler();
  if (write) {
    result->save(f.profile);
    std::printf("profile: %d step(s) written to %s\n", f.steps, f.profile.c_str());
  }
}

// The most memory LibTorch's allocator has handed out on this rank's GPU, MB; 0 on the CPU.
double peak_gpu_mb(const torch::Device& device) {
#ifdef TANDEM_TORCH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
    return static_cast<double>(stats.allocated_bytes[0].peak) / (1024 * 1024);  // all pools
  }
#endif
  return 0;
}

// The measurement itself, on every rank.
Measurement measure(const cfg::Config& config, tandem::parallel::ProcessGroup& group,
                    const Flags& f) {
  tandem::train::Trainer trainer(config, group);
  auto& comm = group.cpu();
  // GPU work is asynchronous: the clock is read only when the device has finished.
  const auto settle = [&] {
    if (trainer.device().device.is_cuda()) torch::cuda::synchronize();
    comm.barrier();
  };
  for (int s = 0; s < f.warmup; ++s) trainer.train_step();
  Measurement m;
  m.device = trainer.device().description;
  m.precision = trainer.device().bf16 ? "bf16" : "fp32";
  for (int w = 0; w < f.windows; ++w) {
    settle();
    const auto start = Clock::now();
    double tokens = 0;
    for (int s = 0; s < f.steps; ++s) tokens += trainer.train_step().tgt_tokens;  // global count
    settle();
    m.window_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    m.window_tokens.push_back(tokens);
  }
  for (const uint64_t kib : comm.all_gather(static_cast<uint64_t>(tools::peak_rss_mb() * 1024))) {
    m.rss_mb.push_back(static_cast<double>(kib) / 1024);
  }
  const auto gpu_kib = static_cast<uint64_t>(peak_gpu_mb(trainer.device().device) * 1024);
  for (const uint64_t kib : comm.all_gather(gpu_kib)) {
    m.gpu_mb.push_back(static_cast<double>(kib) / 1024);
  }
  if (!f.profile.empty()) profile_steps(trainer, f, settle, group.rank() == 0);
  return m;
}

// Hidden mode: one rank under mpirun; rank 0 writes the measurement for the launcher.
int worker_main(int argc, char** argv, const Flags& f) {
  tandem::parallel::ProcessGroup group(&argc, &argv);
  try {
    const auto config = cfg::load_config(f.worker_dir + "/config.yaml");
    const auto m = measure(config, group, f);
    if (group.rank() == 0)
      std::ofstream(f.worker_dir + "/result.json") << measurement_json(m).dump();
    return 0;
  } catch (const std::exception& e) {
    tandem::log::error(e.what());
    const int code = tandem::exit_code_for(e);
    if (group.size() > 1) group.abort(code);  // no rank may be left waiting in a collective
    return code;
  }
}

Measurement measure_under_mpirun(const Flags& f, const TempDir& scratch) {
  const std::string threads = std::to_string(f.threads);
  setenv("OMP_NUM_THREADS", threads.c_str(), 1);
  setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
  auto command =
      tools::mpirun_command(f.ranks, f.threads, {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"});
  std::printf("launch: %s -np %d %s (%s)\n", command.argv[0].c_str(), f.ranks,
              command.binding.c_str(), command.why.c_str());
  command.argv.insert(command.argv.end(),
                      {tools::self_executable(), "--worker-dir", scratch.path(), "--warmup",
                       std::to_string(f.warmup), "--steps", std::to_string(f.steps), "--windows",
                       std::to_string(f.windows)});
  if (!f.profile.empty()) {
    command.argv.insert(command.argv.end(),
                        {"--profile", std::filesystem::absolute(f.profile).string()});
  }
  const int code = tools::run_process(command.argv);
  if (code != 0)
    throw std::runtime_error("the benchmark's ranks failed (mpirun exit code " +
                             std::to_string(code) + ")");
  std::ifstream in(scratch.file("result.json"));
  if (!in) throw std::runtime_error("the benchmark's rank 0 wrote no result");
  return measurement_from_json(nlohmann::json::parse(in));
}

Measurement measure_in_process(const cfg::Config& config, const Flags& f,
                               tandem::parallel::ProcessGroup& group) {
  std::printf("launch: 1 rank in this process (not pinned)\n");
  return measure(config, group, f);
}

void check_flags(const Flags& f) {
  const auto at_least = [](const char* flag, int value, int minimum) {
    if (value < minimum) {
      throw std::invalid_argument(std::string(flag) + " " + std::to_string(value) +
                                  ": expected >= " + std::to_string(minimum));
    }
  };
  if (f.corpus.empty())
    throw std::invalid_argument("--corpus is required (an HDF5 corpus from tandem-prep)");
  at_least("--ranks", f.ranks, 1);
  at_least("--threads", f.threads, 1);
  at_least("--warmup", f.warmup, 0);
  at_least("--steps", f.steps, 1);
  at_least("--windows", f.windows, 1);
}

void print_setup(const cfg::Config& config, const Flags& f) {
  const auto& m = config.model;
  std::printf("tandem-bench: corpus %s\n", config.data.corpus.c_str());
  std::printf(
      "model: d_model %lld, heads %lld, layers %lld+%lld, d_ff %lld, dropout %g; max_tokens %lld "
      "per rank\n",
      static_cast<long long>(m.d_model), static_cast<long long>(m.heads),
      static_cast<long long>(m.encoder_layers), static_cast<long long>(m.decoder_layers),
      static_cast<long long>(m.d_ff), m.dropout, static_cast<long long>(config.data.max_tokens));
  std::printf(
      "%d rank(s) x %d thread(s) on a machine with %d usable core(s) (shared with whatever else "
      "runs)\n",
      f.ranks, f.threads, tools::usable_cores());
  std::printf("schedule: %d warm-up step(s), then %d window(s) of %d step(s)\n", f.warmup,
              f.windows, f.steps);
}

void print_windows(const Measurement& m) {
  const auto rates = m.rates();
  for (size_t w = 0; w < rates.size(); ++w) {
    std::printf("window %zu: %.0f target tokens in %.3f s = %.1f tokens/s\n", w + 1,
                m.window_tokens[w], m.window_seconds[w], rates[w]);
  }
  std::printf("target tokens/s (median of %zu windows, all ranks): %.1f\n", rates.size(),
              m.median_tokens_per_s());
}

void print_rss(const Measurement& m) {
  std::printf("peak RSS per rank:");
  for (size_t r = 0; r < m.rss_mb.size(); ++r) {
    std::printf("%s rank %zu %.1f MB", r ? "," : "", r, m.rss_mb[r]);
  }
  std::printf("; max %.1f MB\n", m.max_rss_mb());
  if (std::all_of(m.gpu_mb.begin(), m.gpu_mb.end(), [](double mb) { return mb == 0; })) return;
  std::printf("peak GPU memory allocated per rank:");
  for (size_t r = 0; r < m.gpu_mb.size(); ++r) {
    std::printf("%s rank %zu %.1f MB", r ? "," : "", r, m.gpu_mb[r]);
  }
  std::printf("\n");
}

// Prints the measurement with its FLOPs and returns the JSON record of it.
nlohmann::json report(const Measurement& m, const cfg::Config& config, const Flags& f) {
  print_windows(m);
  tandem::data::Corpus corpus(config.data.corpus);
  const int64_t vocab_size = corpus.vocab().size();
  const auto lengths =
      tools::length_stats(corpus.src_lengths("train"), corpus.tgt_lengths("train"));
  const auto flops = tools::model_flops(config.model, vocab_size, lengths);
  std::printf("%s", tools::describe(flops, config.model, vocab_size, lengths).c_str());
  const double rate = m.median_tokens_per_s();
  const double gflops = flops.total() * rate / 1e9;
  std::printf("achieved: %.4g FLOPs/token x %.1f tokens/s = %.2f GFLOP/s (%.2f per core in use)\n",
              flops.total(), rate, gflops, gflops / (f.ranks * f.threads));
  const double peak = f.peak_tflops > 0 ? f.peak_tflops : tools::peak_bf16_tflops(m.device);
  double mfu = 0;
  if (peak > 0) {
    mfu = gflops / 1e3 / (peak * f.ranks);
    std::printf("device %s: MFU %.1f%% of %.0f TFLOP/s (dense bf16 peak per device)\n",
                m.device.c_str(), 100 * mfu, peak);
  }
  print_rss(m);
  return {{"tgt_tokens_per_s", rate},
          {"device", m.device},
          {"precision", m.precision},
          {"mfu", mfu},
          {"peak_rss_mb", m.max_rss_mb()},
          {"ranks", f.ranks},
          {"threads", f.threads},
          {"flops_per_token", flops.total()},
          {"achieved_gflops", gflops},
          {"steps", f.steps},
          {"windows", f.windows},
          {"warmup", f.warmup},
          {"window_tokens_per_s", m.rates()},
          {"peak_rss_mb_per_rank", m.rss_mb},
          {"peak_gpu_mb_per_rank", m.gpu_mb},
          {"vocab_size", vocab_size},
          {"max_tokens", config.data.max_tokens}};
}

// Runs the yardstick on the same work, prints it beside Tandem's figures, adds it to `record`.
void compare_with_pytorch(const Flags& f, const cfg::Config& config, const Measurement& m,
                          const TempDir& scratch, nlohmann::json& record) {
  auto options = f.yardstick;
  options.ranks = f.ranks;
  options.threads = f.threads;
  options.steps = f.steps * f.windows;  // as many timed steps as Tandem's windows hold
  options.cuda = m.device.rfind("cuda", 0) == 0;
  options.precision = f.pytorch_precision.empty() ? m.precision : f.pytorch_precision;
  std::printf(
      "PyTorch yardstick: %s, %d rank(s) x %d thread(s), %s, %s, %d timed steps after its own 2 "
      "warm-up steps (it reports their mean, not a median)\n",
      options.script.c_str(), options.ranks, options.threads, options.cuda ? "cuda" : "cpu",
      options.precision == "bf16" ? "bf16 autocast" : "fp32", options.steps);
  std::printf("  tandem trained in %s\n", m.precision == "bf16" ? "bf16 matrix products" : "fp32");
  for (const auto& note : tools::yardstick_differences(config))
    std::printf("  note: %s\n", note.c_str());
  if (options.data_dir.empty()) {
    std::printf(
        "  note: its text is the corpus's train split decoded with the corpus's vocabulary; "
        "re-encoding it may give slightly different tokens than Tandem reads\n");
  }
  const auto y = tools::run_yardstick(options, config, tandem::data::Corpus(config.data.corpus),
                                      scratch.path());
  const double rate = record["tgt_tokens_per_s"], rss = record["peak_rss_mb"];
  std::printf("tandem / pytorch target tokens/s: %.1f / %.1f = %.2fx\n", rate, y.tgt_tokens_per_s,
              rate / y.tgt_tokens_per_s);
  std::printf(
      "tandem / pytorch peak RSS: %.1f MB (max over ranks) / %.1f MB (its rank 0) = %.2fx\n", rss,
      y.rank0_peak_rss_mb, rss / y.rank0_peak_rss_mb);
  record["pytorch"] = y.record;
  record["pytorch_tgt_tokens_per_s"] = y.tgt_tokens_per_s;
  record["pytorch_peak_rss_mb"] = y.rank0_peak_rss_mb;
  record["tokens_per_s_ratio"] = rate / y.tgt_tokens_per_s;
  record["peak_rss_ratio"] = rss / y.rank0_peak_rss_mb;
  record["pytorch_precision"] = options.precision;
  record["pytorch_text"] = y.reencoded ? "re-encoded from the corpus" : "given";
}

// `group` is this process's rank when it measures in-process (--ranks 1), else null.
int bench(const Flags& f, tandem::parallel::ProcessGroup* group) {
  check_flags(f);
  TempDir scratch("bench");
  const auto config = resolve_config(f, scratch.file("run"));
  // A bad corpus is bad input: found here, before any launch.
  { tandem::data::Corpus check(config.data.corpus); }
  if (f.pytorch) tools::check_yardstick(f.yardstick, config.model);
  std::ofstream(scratch.file("config.yaml")) << cfg::to_yaml(config);
  print_setup(config, f);
  const auto m =
      group != nullptr ? measure_in_process(config, f, *group) : measure_under_mpirun(f, scratch);
  auto record = report(m, config, f);
  if (f.pytorch) compare_with_pytorch(f, config, m, scratch, record);
  std::printf("%s\n", record.dump().c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Line by line: the figures reach a pipe or file as they are printed, whatever happens later.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"Training speed: target tokens/s, FLOP/s and peak RSS, optionally beside PyTorch."};
  Flags f;
  f.yardstick.script = (std::filesystem::path(TANDEM_SOURCE_DIR) / "../shared/bench/ref_train.py")
                           .lexically_normal()
                           .string();
  app.add_option("--corpus", f.corpus,
                 "HDF5 corpus written by tandem-prep (its train split is used)");
  app.add_option("--ranks", f.ranks, "data-parallel ranks (> 1: run under mpirun)")
      ->capture_default_str();
  app.add_option("--threads", f.threads, "intra-op threads per rank")->capture_default_str();
  app.add_option("--config", f.config_path, "YAML config (default: the tiny shape)");
  app.add_option("--warmup", f.warmup, "untimed steps first")->capture_default_str();
  app.add_option("--steps", f.steps, "steps per timed window")->capture_default_str();
  app.add_option("--windows", f.windows, "timed windows; the median is reported")
      ->capture_default_str();
  app.add_option("--set", f.overrides, "override a config key: key.path=value (repeatable)");
  app.add_flag("--pytorch", f.pytorch, "also run the PyTorch yardstick on the same work");
  app.add_option("--peak-tflops", f.peak_tflops,
                 "device peak for MFU, TFLOP/s (default: known GPUs' dense bf16 figure)");
  app.add_option("--pytorch-precision", f.pytorch_precision,
                 "the yardstick's precision: fp32, or bf16 autocast (default: Tandem's own)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--pytorch-script", f.yardstick.script, "the yardstick, ref_train.py")
      ->capture_default_str();
  app.add_option("--pytorch-python", f.yardstick.python, "python with torch and sentencepiece")
      ->capture_default_str();
  app.add_option(
      "--pytorch-data", f.yardstick.data_dir,
      "directory with the original train.en/train.es (default: decoded from the corpus)");
  app.add_option("--pytorch-spm", f.yardstick.spm,
                 "its SentencePiece model (default: the corpus's)");
  app.add_option("--profile", f.profile,
                 "after the windows, trace --steps more steps with LibTorch's profiler into this "
                 "Chrome trace file (rank 0; GPU kernels on CUDA)");
  app.add_option("--worker-dir", f.worker_dir)->group("");  // hidden: a rank under mpirun
  app.footer(kExamples);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "tandem-bench: error: %s (see --help)\n", e.what());
    return tandem::kExitUsage;
  }
  if (!f.worker_dir.empty()) return worker_main(argc, argv, f);
  // Measuring in this process: MPI first and last, as in tandem-train, so everything CUDA, NCCL and
  // HDF5 set up while measuring is set up after MPI_Init and gone before MPI_Finalize.
  std::optional<tandem::parallel::ProcessGroup> group;
  if (f.ranks == 1) group.emplace(&argc, &argv);
  return tools::run_tool("tandem-bench", [&] { return bench(f, group ? &*group : nullptr); });
}
