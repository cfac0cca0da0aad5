// What tandem-bench measures and prints; see train_bench.h. Trainer::train_step() runs W warm-up
// steps, then K timed windows of S steps, a barrier before each clock read so that every rank
// times the same interval.
#include "trainer/bench/train_bench.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "data/corpus/corpus.h"
#include "trainer/bench/flops.h"
#include "trainer/bench/pytorch.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/common/temp_dir.h"
#include "trainer/config/config.h"
#include "trainer/jobs/mpirun_command.h"
#include "trainer/jobs/process.h"
#include "trainer/parallel/process_group.h"
#include "trainer/train/trainer.h"

#ifdef TANDEM_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace tandem::bench {
namespace {

namespace cfg = tandem::config;
using tandem::TempDir;
using Clock = std::chrono::steady_clock;

// Keys the bench owns: --set may not change them (prefixes of the key path).
const std::vector<std::string> kOwnedKeys = {"data.corpus", "train.threads", "checkpoint.",
                                             "valid.every_steps"};

struct Measurement {
  std::vector<double> window_tokens, window_seconds;  // global target tokens, seconds per window
  std::vector<double> rss_mb;                         // peak RSS of each rank
  std::vector<double> gpu_mb;  // peak GPU memory LibTorch's allocator handed out, per rank; 0: CPU
  std::string device = "cpu";  // rank 0's, as the trainer describes it
  std::string precision = "fp32";  // what train.precision resolved to
  int64_t max_tokens = 0;          // what data.max_tokens resolved to (auto: batch_fit.h)

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
          {"precision", m.precision},
          {"max_tokens", m.max_tokens}};
}

Measurement measurement_from_json(const nlohmann::json& j) {
  return {j.at("window_tokens").get<std::vector<double>>(),
          j.at("window_seconds").get<std::vector<double>>(),
          j.at("rss_mb").get<std::vector<double>>(),
          j.at("gpu_mb").get<std::vector<double>>(),
          j.at("device").get<std::string>(),
          j.at("precision").get<std::string>(),
          j.at("max_tokens").get<int64_t>()};
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

cfg::Config resolve_config(const TrainBenchFlags& f, const std::string& run_dir) {
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
void profile_steps(tandem::train::Trainer& trainer, const TrainBenchFlags& f, Settle settle,
                   bool write) {
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
                    const TrainBenchFlags& f) {
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
  m.max_tokens = trainer.config().data.max_tokens;
  for (int w = 0; w < f.windows; ++w) {
    settle();
    const auto start = Clock::now();
    double tokens = 0;
    for (int s = 0; s < f.steps; ++s) tokens += trainer.train_step().tgt_tokens;  // global count
    settle();
    m.window_seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    m.window_tokens.push_back(tokens);
  }
  for (const uint64_t kib : comm.all_gather(static_cast<uint64_t>(jobs::peak_rss_mb() * 1024))) {
    m.rss_mb.push_back(static_cast<double>(kib) / 1024);
  }
  const auto gpu_kib = static_cast<uint64_t>(peak_gpu_mb(trainer.device().device) * 1024);
  for (const uint64_t kib : comm.all_gather(gpu_kib)) {
    m.gpu_mb.push_back(static_cast<double>(kib) / 1024);
  }
  if (!f.profile.empty()) profile_steps(trainer, f, settle, group.rank() == 0);
  return m;
}

Measurement measure_under_mpirun(const TrainBenchFlags& f, const TempDir& scratch) {
  const std::string threads = std::to_string(f.threads);
  auto command = jobs::mpirun_command(
      f.ranks, f.threads, {"OMP_NUM_THREADS=" + threads, "OPENBLAS_NUM_THREADS=" + threads});
  std::printf("launch: %s -np %d %s (%s)\n", command.argv[0].c_str(), f.ranks,
              command.binding.c_str(), command.why.c_str());
  command.argv.insert(command.argv.end(),
                      {jobs::self_executable(), "--worker-dir", scratch.path(), "--warmup",
                       std::to_string(f.warmup), "--steps", std::to_string(f.steps), "--windows",
                       std::to_string(f.windows)});
  if (!f.profile.empty()) {
    command.argv.insert(command.argv.end(),
                        {"--profile", std::filesystem::absolute(f.profile).string()});
  }
  const int code = jobs::run_process(command.argv, "", command.environment);
  if (code != 0)
    throw std::runtime_error("the benchmark's ranks failed (mpirun exit code " +
                             std::to_string(code) + ")");
  std::ifstream in(scratch.file("result.json"));
  if (!in) throw std::runtime_error("the benchmark's rank 0 wrote no result");
  return measurement_from_json(nlohmann::json::parse(in));
}

Measurement measure_in_process(const cfg::Config& config, const TrainBenchFlags& f,
                               tandem::parallel::ProcessGroup& group) {
  std::printf("launch: 1 rank in this process (not pinned)\n");
  return measure(config, group, f);
}

void check_flags(const TrainBenchFlags& f) {
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

void print_setup(const cfg::Config& config, const TrainBenchFlags& f) {
  const auto& m = config.model;
  std::printf("tandem-bench: corpus %s\n", config.data.corpus.c_str());
  std::printf(
      "model: d_model %lld, heads %lld, layers %lld+%lld, d_ff %lld, dropout %g; max_tokens %s "
      "per rank\n",
      static_cast<long long>(m.d_model), static_cast<long long>(m.heads),
      static_cast<long long>(m.encoder_layers), static_cast<long long>(m.decoder_layers),
      static_cast<long long>(m.d_ff), m.dropout,
      config.data.max_tokens == cfg::kAutoMaxTokens
          ? "auto"
          : std::to_string(config.data.max_tokens).c_str());
  std::printf(
      "%d rank(s) x %d thread(s) on a machine with %d usable core(s) (shared with whatever else "
      "runs)\n",
      f.ranks, f.threads, jobs::usable_cores());
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
nlohmann::json report(const Measurement& m, const cfg::Config& config, const TrainBenchFlags& f) {
  print_windows(m);
  tandem::data::Corpus corpus(config.data.corpus);
  const int64_t vocab_size = corpus.vocab().size();
  const auto lengths =
      length_stats(corpus.src_lengths("train"), corpus.tgt_lengths("train"));
  const auto flops = model_flops(config.model, vocab_size, lengths);
  std::printf("%s", describe(flops, config.model, vocab_size, lengths).c_str());
  const double rate = m.median_tokens_per_s();
  const double gflops = flops.total() * rate / 1e9;
  std::printf("achieved: %.4g FLOPs/token x %.1f tokens/s = %.2f GFLOP/s (%.2f per core in use)\n",
              flops.total(), rate, gflops, gflops / (f.ranks * f.threads));
  const double peak = f.peak_tflops > 0 ? f.peak_tflops : peak_bf16_tflops(m.device);
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
          {"max_tokens", m.max_tokens}};
}

// Runs the yardstick on the same work, prints it beside Tandem's figures, adds it to `record`.
void compare_with_pytorch(const TrainBenchFlags& f, const cfg::Config& config, const Measurement& m,
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
  for (const auto& note : yardstick_differences(config))
    std::printf("  note: %s\n", note.c_str());
  if (options.data_dir.empty()) {
    std::printf(
        "  note: its text is the corpus's train split decoded with the corpus's vocabulary; "
        "re-encoding it may give slightly different tokens than Tandem reads\n");
  }
  const auto y = run_yardstick(options, config, tandem::data::Corpus(config.data.corpus),
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

}  // namespace

int run_train_bench(const TrainBenchFlags& f, parallel::ProcessGroup* group) {
  check_flags(f);
  TempDir scratch("bench");
  const auto config = resolve_config(f, scratch.file("run"));
  // A bad corpus is bad input: found here, before any launch.
  { tandem::data::Corpus check(config.data.corpus); }
  if (f.pytorch) check_yardstick(f.yardstick, config.model);
  std::ofstream(scratch.file("config.yaml")) << cfg::to_yaml(config);
  print_setup(config, f);
  const auto m =
      group != nullptr ? measure_in_process(config, f, *group) : measure_under_mpirun(f, scratch);
  auto measured = config;  // data.max_tokens as the ranks resolved it (auto: batch_fit.h)
  measured.data.max_tokens = m.max_tokens;
  if (config.data.max_tokens == cfg::kAutoMaxTokens) {
    std::printf("data.max_tokens auto: %lld tokens per rank\n",
                static_cast<long long>(m.max_tokens));
  }
  auto record = report(m, measured, f);
  if (f.pytorch) compare_with_pytorch(f, measured, m, scratch, record);
  std::printf("%s\n", record.dump().c_str());
  return 0;
}

int train_bench_worker(int argc, char** argv, const TrainBenchFlags& f) {
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

}  // namespace tandem::bench
