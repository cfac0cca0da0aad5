// tandem-bench: training speed on a corpus (target tokens/s, FLOP/s, MFU, peak memory), optionally
// beside the PyTorch yardstick; bench/train_bench.h measures and prints.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "trainer/parallel/process_group.h"
#include "trainer/bench/train_bench.h"
#include "trainer/cli/tool_main.h"

namespace {

namespace cli = tandem::cli;

constexpr const char* kExamples = R"(Examples:
  tandem-bench --corpus work/bible/corpus.h5 --ranks 1 --threads 1
  tandem-bench --corpus work/bible/corpus.h5 --ranks 2 --warmup 3 --steps 10 --windows 3 --pytorch
  tandem-bench --corpus work/bible/corpus.h5 --set train.precision=bf16 --pytorch --pytorch-precision fp32
  tandem-bench --corpus c.h5 --ranks 2 --config configs/base.yaml --set data.max_tokens=2048
Without --config the model is the tiny shape (d_model 256, 4 heads, 3+3 layers, d_ff 1024, dropout
0.1) with max_tokens 4096 per rank, in fp32. The yardstick runs in Tandem's precision unless
--pytorch-precision says otherwise. The bench sets data.corpus, train.threads, checkpoint.* (a
temporary directory, no saving) and valid.every_steps (0) itself.)";

}  // namespace

int main(int argc, char** argv) {
  // Line by line: the figures reach a pipe or file as they are printed, whatever happens later.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  CLI::App app{"Training speed: target tokens/s, FLOP/s and peak RSS, optionally beside PyTorch."};
  tandem::bench::TrainBenchFlags f;
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
  if (const auto done = cli::parse_command_line(app, "tandem-bench", argc, argv)) return *done;
  if (!f.worker_dir.empty()) return tandem::bench::train_bench_worker(argc, argv, f);
  // Measuring in this process: MPI first and last, as in tandem-train, so everything CUDA, NCCL and
  // HDF5 set up while measuring is set up after MPI_Init and gone before MPI_Finalize.
  std::optional<tandem::parallel::ProcessGroup> group;
  if (f.ranks == 1) group.emplace(&argc, &argv);
  return cli::run_tool("tandem-bench", [&] {
    return tandem::bench::run_train_bench(f, group ? &*group : nullptr);
  });
}
