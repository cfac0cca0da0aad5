// What tandem-bench-data measures and prints; see data_bench.h.
#include "trainer/bench/data_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "data/batching/loader.h"
#include "trainer/jobs/process.h"
#include "trainer/runtime/cpu_runtime.h"

namespace tandem::bench {
namespace {

using Clock = std::chrono::steady_clock;

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

// Per window: target tokens delivered, wall seconds, and seconds spent inside next_step().
struct Window {
  double tokens = 0, wall = 0, blocked = 0;
};

std::vector<Window> measure(data::ShardedLoader& loader, const DataBenchOptions& o,
                            double work_ms) {
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

// Opening the corpus: the split's lengths and the first epoch's plan, as a rank does before its
// first step.
struct Startup {
  double seconds = 0, rss_before = 0, rss_after = 0;
  int64_t batches = 0;
};

// The three runs, each from where the previous one stopped, so that none rereads batches an
// earlier run brought into the page cache: on a cold cache all three read from disk alike.
struct Runs {
  std::vector<Window> unprefetched, prefetched, overlapped;
};

Runs measure_runs(const data::Corpus& corpus, data::ShardedLoader& sync,
                  const DataBenchOptions& o) {
  Runs runs;
  runs.unprefetched = measure(sync, o, 0);
  data::ShardedLoader ahead(corpus, "train", o.plan, o.rank, o.world, o.prefetch);
  ahead.set_position(sync.position());
  runs.prefetched = measure(ahead, o, 0);
  data::ShardedLoader overlapped(corpus, "train", o.plan, o.rank, o.world, o.prefetch);
  overlapped.set_position(ahead.position());
  runs.overlapped = measure(overlapped, o, o.step_ms);
  return runs;
}

void report(const DataBenchOptions& o, const data::Corpus& corpus, const Startup& start,
            const Runs& runs) {
  const double sync_rate = median_rate(runs.unprefetched, false);
  const double ahead_rate = median_rate(runs.prefetched, false);
  const double blocked_ms = median_blocked_ms(runs.overlapped, o.steps);
  std::printf("rank %d of %d, accum %lld, median of %d windows of %lld steps:\n", o.rank, o.world,
              static_cast<long long>(o.accum), o.windows, static_cast<long long>(o.steps));
  std::printf("  loader, prefetch off:  %12.0f target tokens/s (%.2f ms a step)\n", sync_rate,
              median_blocked_ms(runs.unprefetched, o.steps));
  std::printf("  loader, prefetch %lld:   %12.0f target tokens/s\n",
              static_cast<long long>(o.prefetch), ahead_rate);
  std::printf("  with %.0f ms of work a step: next_step() blocks %.3f ms a step (prefetch %lld)\n",
              o.step_ms, blocked_ms, static_cast<long long>(o.prefetch));
  std::printf("peak RSS %.0f MiB\n", jobs::peak_rss_mb());
  const nlohmann::json record{{"corpus", o.corpus},
                              {"pairs", corpus.size("train")},
                              {"world", o.world},
                              {"rank", o.rank},
                              {"max_tokens", o.plan.max_tokens},
                              {"startup_s", start.seconds},
                              {"rss_before_mb", start.rss_before},
                              {"rss_after_startup_mb", start.rss_after},
                              {"tgt_tokens_per_s_prefetch_off", sync_rate},
                              {"tgt_tokens_per_s_prefetch", ahead_rate},
                              {"step_ms", o.step_ms},
                              {"blocked_ms_per_step_prefetch", blocked_ms},
                              {"peak_rss_mb", jobs::peak_rss_mb()}};
  std::printf("%s\n", record.dump().c_str());
}

}  // namespace

int run_data_bench(const DataBenchOptions& o) {
  runtime::configure_cpu_runtime({1, 0, runtime::Workload::kTraining});
  Startup start;
  start.rss_before = rss_mb();
  const auto begin = Clock::now();
  const data::Corpus corpus(o.corpus);
  data::ShardedLoader sync(corpus, "train", o.plan, o.rank, o.world, 0);
  start.batches = sync.batches_in_epoch();
  start.seconds = seconds_since(begin);
  start.rss_after = rss_mb();
  std::printf("corpus %s: %lld training pairs, %lld global batches an epoch (max_tokens %lld)\n",
              o.corpus.c_str(), static_cast<long long>(corpus.size("train")),
              static_cast<long long>(start.batches), static_cast<long long>(o.plan.max_tokens));
  std::printf("start-up (corpus lengths + first plan): %.2f s, RSS %.0f -> %.0f MiB (+%.0f)\n",
              start.seconds, start.rss_before, start.rss_after, start.rss_after - start.rss_before);
  report(o, corpus, start, measure_runs(corpus, sync, o));
  return 0;
}

}  // namespace tandem::bench
