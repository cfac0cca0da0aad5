// tandem-bench-data: what the data path costs a training rank on a corpus (start-up, loader
// tokens/s, prefetch overlap); bench/data_bench.h measures and prints.
#include <CLI/CLI.hpp>
#include <string>

#include "trainer/bench/data_bench.h"
#include "trainer/cli/tool_main.h"

namespace {

constexpr const char* kExamples = R"(Example:
  tandem-bench-data --corpus work/bible/corpus.h5 --world 2 --rank 0 --max-tokens 4096)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Data-path costs of one training rank: start-up, loader tokens/s, prefetch overlap."};
  tandem::bench::DataBenchOptions o;
  app.add_option("--corpus", o.corpus, "HDF5 corpus written by tandem-prep")->required();
  app.add_option("--world", o.world, "ranks in the simulated job")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--rank", o.rank, "the rank measured")
      ->check(tandem::cli::kNonNegative)
      ->capture_default_str();
  app.add_option("--max-tokens", o.plan.max_tokens, "data.max_tokens")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--seed", o.plan.seed, "data.seed")->capture_default_str();
  app.add_option("--accum", o.accum, "train.accum_steps")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--prefetch", o.prefetch, "data.prefetch_steps for the prefetched runs")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--warmup", o.warmup, "steps read before each measurement")->capture_default_str();
  app.add_option("--steps", o.steps, "steps per window")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--windows", o.windows, "windows; medians are reported")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--step-ms", o.step_ms, "training-thread work per step in the overlap run")
      ->check(tandem::cli::kNonNegative)
      ->capture_default_str();
  app.footer(kExamples);
  const auto rank_in_world = [&] {
    if (o.rank >= o.world) {
      throw CLI::ValidationError(
          "--rank", std::to_string(o.rank) + " is not below --world " + std::to_string(o.world));
    }
  };
  if (const auto done =
          tandem::cli::parse_command_line(app, "tandem-bench-data", argc, argv, rank_in_world)) {
    return *done;
  }
  return tandem::cli::run_tool("tandem-bench-data",
                                 [&] { return tandem::bench::run_data_bench(o); });
}
