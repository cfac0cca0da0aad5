// tandem-bench-data: what the data path costs a training rank, for one corpus, in one run:
//   start-up   opening the corpus, the split's lengths and the first epoch's plan (what a rank
//              does before its first step), with wall seconds and resident memory before/after;
//   loader     target tokens/s this rank's loader delivers, reading --steps steps in the step
//              (prefetch off) and from the prefetch thread;
//   overlap    with prefetch on and --step-ms of work per step on the training thread (a sleep
//              standing in for forward/backward), the median time next_step() still blocks.
// Figures are medians over --windows windows of --steps steps each, after --warmup steps; the
// rank and world size choose which batches this rank reads, as in training; the three runs read
// successive steps of the plan. Drop the page cache first (sync; echo 1 >
// /proc/sys/vm/drop_caches) to measure reads from disk. One JSON line last.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "data/loader.h"
#include "trainer/common/error.h"
#include "trainer/tools/process.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/cpu_runtime.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kExamples = R"(Example:
  tandem-bench-data --corpus work/bible/corpus.h5 --world 2 --rank 0 --max-tokens 4096)";

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Resident set now (VmRSS), in MiB.
double rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == "VmRSS:") {
      double kib = 0;
      status >> kib;
      return kib / 1024.0;
    }
    status.ignore(1 << 12, '\n');
  }
  return 0;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

struct Options {
  std::string corpus;
  int world = 1;
  int rank = 0;
  tandem::data::BatchPlanOptions plan;
  int64_t accum = 1;
  int64_t prefetch = 2;
  int64_t warmup = 5;
  int64_t steps = 50;
  int windows = 5;
  double step_ms = 50;
};

// Per window: target tokens delivered, wall seconds, and seconds spent inside next_step().
struct Window {
  double tokens = 0, wall = 0, blocked = 0;
};

std::vector<Window> measure(tandem::data::ShardedLoader& loader, const Options& o, double work_ms) {
  const auto step = [&](Window& w) {
    const auto start = Clock::now();
    for (const auto& batch : loader.next_step(o.accum)) w.tokens += batch.tgt_tokens;
    w.blocked += seconds_since(start);
    if (work_ms > 0)
      std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(work_ms));
  };
  Window discard;
  for (int64_t s = 0; s < o.warmup; ++s) step(discard);
  std::vector<Window> windows(o.windows);
  for (Window& w : windows) {
    const auto start = Clock::now();
    for (int64_t s = 0; s < o.steps; ++s) step(w);
    w.wall = seconds_since(start);
  }
  return windows;
}

double median_rate(const std::vector<Window>& windows, bool blocked_only) {
  std::vector<double> rates;
  for (const Window& w : windows) rates.push_back(w.tokens / (blocked_only ? w.blocked : w.wall));
  return median(rates);
}

double median_blocked_ms(const std::vector<Window>& windows, int64_t steps) {
  std::vector<double> ms;
  for (const Window& w : windows) ms.push_back(1000.0 * w.blocked / static_cast<double>(steps));
  return median(ms);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Data-path costs of one training rank: start-up, loader tokens/s, prefetch overlap."};
  Options o;
  app.add_option("--corpus", o.corpus, "HDF5 corpus written by tandem-prep")->required();
  app.add_option("--world", o.world, "ranks in the simulated job")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--rank", o.rank, "the rank measured")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-tokens", o.plan.max_tokens, "data.max_tokens")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--seed", o.plan.seed, "data.seed")->capture_default_str();
  app.add_option("--accum", o.accum, "train.accum_steps")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--prefetch", o.prefetch, "data.prefetch_steps for the prefetched runs")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "steps read before each measurement")->capture_default_str();
  app.add_option("--steps", o.steps, "steps per window")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--windows", o.windows, "windows; medians are reported")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--step-ms", o.step_ms, "training-thread work per step in the overlap run")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.footer(kExamples);
  app.failure_message(tandem::tools::usage_error_line("tandem-bench-data"));
  try {
    app.parse(argc, argv);
    if (o.rank >= o.world) {
      throw CLI::ValidationError(
          "--rank", std::to_string(o.rank) + " is not below --world " + std::to_string(o.world));
    }
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : tandem::kExitUsage;
  }
  return tandem::tools::run_tool("tandem-bench-data", [&] {
    tandem::train::configure_cpu_runtime({1, 0, tandem::train::Workload::kTraining});
    const double rss_before = rss_mb();
    const auto start = Clock::now();
    const tandem::data::Corpus corpus(o.corpus);
    tandem::data::ShardedLoader sync(corpus, "train", o.plan, o.rank, o.world, 0);
    const int64_t batches = sync.batches_in_epoch();
    const double startup_s = seconds_since(start);
    const double rss_after = rss_mb();
    std::printf("corpus %s: %lld training pairs, %lld global batches an epoch (max_tokens %lld)\n",
                o.corpus.c_str(), static_cast<long long>(corpus.size("train")),
                static_cast<long long>(batches), static_cast<long long>(o.plan.max_tokens));
    std::printf("start-up (corpus lengths + first plan): %.2f s, RSS %.0f -> %.0f MiB (+%.0f)\n",
                startup_s, rss_before, rss_after, rss_after - rss_before);

    // Each run starts where the previous one stopped, so none rereads batches an earlier run
    // brought into the page cache: on a cold cache all three read from disk alike.
    const auto unprefetched = measure(sync, o, 0);
    tandem::data::ShardedLoader ahead(corpus, "train", o.plan, o.rank, o.world, o.prefetch);
    ahead.set_position(sync.position());
    const auto prefetched = measure(ahead, o, 0);
    tandem::data::ShardedLoader overlapped(corpus, "train", o.plan, o.rank, o.world, o.prefetch);
    overlapped.set_position(ahead.position());
    const auto overlap = measure(overlapped, o, o.step_ms);
    const double sync_rate = median_rate(unprefetched, false);
    const double ahead_rate = median_rate(prefetched, false);
    std::printf("rank %d of %d, accum %lld, median of %d windows of %lld steps:\n", o.rank, o.world,
                static_cast<long long>(o.accum), o.windows, static_cast<long long>(o.steps));
    std::printf("  loader, prefetch off:  %12.0f target tokens/s (%.2f ms a step)\n", sync_rate,
                median_blocked_ms(unprefetched, o.steps));
    std::printf("  loader, prefetch %lld:   %12.0f target tokens/s\n",
                static_cast<long long>(o.prefetch), ahead_rate);
    std::printf(
        "  with %.0f ms of work a step: next_step() blocks %.3f ms a step (prefetch %lld)\n",
        o.step_ms, median_blocked_ms(overlap, o.steps), static_cast<long long>(o.prefetch));
    std::printf("peak RSS %.0f MiB\n", tandem::tools::peak_rss_mb());
    const nlohmann::json record{
        {"corpus", o.corpus},
        {"pairs", corpus.size("train")},
        {"world", o.world},
        {"rank", o.rank},
        {"max_tokens", o.plan.max_tokens},
        {"startup_s", startup_s},
        {"rss_before_mb", rss_before},
        {"rss_after_startup_mb", rss_after},
        {"tgt_tokens_per_s_prefetch_off", sync_rate},
        {"tgt_tokens_per_s_prefetch", ahead_rate},
        {"step_ms", o.step_ms},
        {"blocked_ms_per_step_prefetch", median_blocked_ms(overlap, o.steps)},
        {"peak_rss_mb", tandem::tools::peak_rss_mb()}};
    std::printf("%s\n", record.dump().c_str());
    return 0;
  });
}
