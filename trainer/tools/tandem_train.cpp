// tandem-train: train a Transformer from a YAML config: alone, as N ranks on this machine
// (--ranks, which starts itself under mpirun), or as one rank of a job mpirun or srun started.
#include <torch/cuda.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "data/corpus.h"
#include "trainer/checkpoint/dir_lock.h"
#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/config/config.h"
#include "trainer/parallel/process_group.h"
#include "trainer/tools/launcher.h"
#include "trainer/tools/process.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/trainer.h"

namespace {

namespace tools = tandem::tools;

constexpr const char* kExamples = R"(Examples:
  tandem-train --config configs/tiny.yaml --ranks auto    # one rank per core (or GPU) here
  tandem-train --config configs/tiny.yaml --ranks 2 --set train.max_steps=2000 --set checkpoint.dir=runs/a
  tandem-train --config configs/tiny.yaml                 # one process
  mpirun -np 16 --hostfile hosts tandem-train --config configs/base.yaml   # across machines
  tandem-train --config configs/tiny.yaml --resume runs/tiny/step-00001000.h5
  tandem-train --config ft.yaml --resume base/last.h5 --reset-optimizer --reset-data   # fine-tune
Training resumes automatically from the newest checkpoint in checkpoint.dir. Ctrl-C or SIGTERM:
every rank finishes its step and saves before the job ends; a second one stops at once.)";

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  tandem::train::ResumeOptions resume;
  std::string ranks;  // "", "auto" or a count
  bool print_config = false;
};

// --ranks as a count for this config; "auto" is one rank per GPU, else per train.threads cores.
int resolve_ranks(const Args& args, const tandem::config::Config& config) {
  if (args.ranks == "auto") {
    const bool gpus =
        config.train.device != tandem::config::Device::kCpu && torch::cuda::is_available();
    return tools::auto_ranks(gpus ? static_cast<int>(torch::cuda::device_count()) : 0,
                             static_cast<int>(config.train.threads));
  }
  char* end = nullptr;
  const long ranks = std::strtol(args.ranks.c_str(), &end, 10);
  if (args.ranks.empty() || *end != '\0' || ranks < 1) {
    throw std::invalid_argument("--ranks '" + args.ranks + "': expected a count >= 1 or auto");
  }
  return static_cast<int>(ranks);
}

// The launcher: this same command line as every rank of an mpirun job, supervised. Input errors
// it can see are reported before the launch: a failing rank takes mpirun a grace period to clean
// up after (launcher.h).
int launch(int argc, char** argv, int ranks, const tandem::config::Config& config) {
  { const tandem::data::Corpus corpus(config.data.corpus); }
  { const tandem::checkpoint::DirLock free_now(config.checkpoint.dir); }
  const std::string threads = std::to_string(config.train.threads);
  setenv("OMP_NUM_THREADS", threads.c_str(), 1);
  setenv("OPENBLAS_NUM_THREADS", threads.c_str(), 1);
  auto command = tools::mpirun_command(ranks, static_cast<int>(config.train.threads),
                                       {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"});
  std::fprintf(stderr, "tandem-train: %d ranks under mpirun, %s (%s)\n", ranks,
               command.binding.c_str(), command.why.c_str());
  command.argv.push_back(tools::self_executable());
  command.argv.insert(command.argv.end(), argv + 1, argv + argc);
  return tools::run_job(command.argv, "tandem-train");
}

// One rank (or the only process): build the trainer and run it.
int train(tandem::parallel::ProcessGroup& group, const Args& args) {
  auto config = tandem::config::load_config(args.config_path, args.overrides);
  if (!args.ranks.empty() && args.ranks != "auto" && resolve_ranks(args, config) != group.size()) {
    throw std::invalid_argument(
        "--ranks " + args.ranks + " but this job has " + std::to_string(group.size()) +
        " rank(s) from its launcher (mpirun -np, srun); give one or the other");
  }
  if (args.print_config) {
    if (group.rank() == 0) std::cout << tandem::config::to_yaml(config);
    return 0;
  }
  if (const std::string hint = tools::unsafe_stop_hint(); !hint.empty() && group.rank() == 0) {
    tandem::log::warn(hint);
  }
  tandem::train::Trainer trainer(std::move(config), group, args.resume);
  return trainer.run();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train an encoder-decoder Transformer (data parallel, N ranks)."};
  Args args;
  app.add_option("--config", args.config_path, "YAML config file")->required();
  app.add_option("--set", args.overrides, "override a config key: key.path=value (repeatable)");
  app.add_option("--ranks", args.ranks,
                 "start N ranks on this machine under mpirun, pinned and with safe stops; auto: "
                 "one per GPU, or per train.threads cores");
  app.add_option("--resume", args.resume.path,
                 "resume from this checkpoint instead of the newest in checkpoint.dir");
  app.add_flag("--reset-optimizer", args.resume.reset_optimizer,
               "on resume, start Adam's moments afresh (fine-tuning)");
  app.add_flag("--reset-data", args.resume.reset_data,
               "on resume, start from the first batch of epoch 1 (e.g. with a new corpus)");
  app.add_flag("--print-config", args.print_config, "print the resolved config and exit");
  app.footer(kExamples);
  if (const auto done = tools::parse_command_line(app, "tandem-train", argc, argv)) return *done;

  if (!args.ranks.empty() && !tools::started_as_rank() && !args.print_config) {
    const int code = tools::run_tool("tandem-train", [&] {
      const auto config = tandem::config::load_config(args.config_path, args.overrides);
      const int ranks = resolve_ranks(args, config);
      return ranks > 1 ? launch(argc, argv, ranks, config) : -1;
    });
    if (code != -1) return code;  // else: one rank, in this process
  }
  tandem::parallel::ProcessGroup group(&argc, &argv);
  try {
    return train(group, args);
  } catch (const std::exception& e) {
    tandem::log::error(e.what());
    const int code = tandem::exit_code_for(e);
    if (group.size() > 1) group.abort(code);  // no rank may be left waiting in a collective
    return code;
  }
}
