// tandem-train: train a Transformer from a YAML config: alone, as N ranks on this machine
// (--ranks, which starts itself under mpirun), or as one rank of a job mpirun or srun started.
#include <torch/cuda.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>

#include "data/corpus/corpus.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/log.h"
#include "trainer/config/config.h"
#include "trainer/jobs/job_environment.h"
#include "trainer/jobs/launcher_flags.h"
#include "trainer/jobs/process.h"
#include "trainer/jobs/rank_main.h"
#include "trainer/jobs/stop_handler.h"
#include "trainer/kernels/cpu/cpu_path.h"
#include "trainer/parallel/process_group.h"
#include "trainer/train/global_batch.h"
#include "trainer/train/metrics_log.h"
#include "trainer/train/saved_checkpoints.h"
#include "trainer/train/trainer.h"

namespace {

namespace cli = tandem::cli;
namespace jobs = tandem::jobs;

constexpr const char* kExamples = R"(Examples:
  tandem-train --config configs/tiny.yaml --ranks auto    # one rank per core (or GPU) here
  tandem-train --config configs/tiny.yaml --ranks 2 --set train.max_steps=2000 --set checkpoint.dir=runs/a
  tandem-train --config configs/tiny.yaml                 # one process
  mpirun -np 16 --hostfile hosts tandem-train --config configs/base.yaml   # across machines
  tandem-train --config configs/tiny.yaml --resume runs/tiny/step-00001000.h5
  tandem-train --config ft.yaml --resume base/last.h5 --reset-optimizer --reset-data   # fine-tune
  tandem-train --config configs/base.yaml --ranks 8 --max-restarts 3   # outlive a lost rank
  tandem-train --config configs/base.yaml --hostfile hosts --max-restarts 3 --min-ranks 8
Training resumes automatically from the newest checkpoint in checkpoint.dir. Ctrl-C or SIGTERM:
every rank finishes its step and saves before the job ends; a second one stops at once. With
--max-restarts K, a job whose rank dies is relaunched from its newest checkpoint, up to K times;
the same failure twice in a row ends it.)";

struct Args {
  std::string config_path;
  std::vector<std::string> overrides;
  tandem::train::ResumeOptions resume;
  jobs::LaunchFlags launch;
  bool keep_global_batch = true;
  bool print_config = false;
};

// --ranks as a count for this config; "auto" is one rank per GPU, else per train.threads cores.
int resolve_ranks(const Args& args, const tandem::config::Config& config) {
  const bool gpus =
      config.train.device != tandem::config::Device::kCpu && torch::cuda::is_available();
  return jobs::requested_ranks(
      args.launch, jobs::auto_ranks(gpus ? static_cast<int>(torch::cuda::device_count()) : 0,
                                     static_cast<int>(config.train.threads)));
}

// --keep-global-batch: a run at `ranks` (the job began at `first_ranks`) gets the accumulation that
// keeps the config's tokens per step, in a --set when it differs; without it, the config's.
jobs::RelaunchArguments keep_global_batch(const tandem::config::Config& config, bool keep,
                                          int first_ranks, int ranks) {
  const int64_t configured = config.train.accum_steps;
  const int64_t accum_steps =
      keep ? tandem::train::accumulation_for(configured, first_ranks, ranks) : configured;
  jobs::RelaunchArguments added;
  if (accum_steps != configured) {
    added.argv = {"--set", "train.accum_steps=" + std::to_string(accum_steps)};
  }
  added.words = ", accumulation " + std::to_string(accum_steps);
  added.settings = {{"accum_steps", accum_steps}};
  return added;
}

// The launcher: this same command line as every rank of an mpirun job, supervised. Input errors
// it can see are reported before the launch: a failing rank takes mpirun a grace period to clean
// up after (jobs/job_supervisor.h).
int launch(int argc, char** argv, int ranks, const std::vector<jobs::Host>& hosts,
           const tandem::config::Config& config, const jobs::RestartOptions& restarts,
           bool keep_global_batch_on) {
  { const tandem::data::Corpus corpus(config.data.corpus); }
  { const jobs::JobLock free_now(jobs::checkpoint_dir_target(config.checkpoint.dir)); }
  const auto metrics = tandem::train::metrics_outputs(config);
  tandem::train::require_writable(metrics);
  const std::string threads = std::to_string(config.train.threads);
  jobs::JobPlan plan;
  plan.hosts = hosts;
  plan.ranks = ranks;
  plan.threads = static_cast<int>(config.train.threads);
  plan.forward_env = {"OMP_NUM_THREADS=" + threads, "OPENBLAS_NUM_THREADS=" + threads};
  plan.rank_command = {jobs::self_executable()};
  plan.rank_command.insert(plan.rank_command.end(), argv + 1, argv + argc);
  plan.relaunch_arguments = [&config, keep_global_batch_on, ranks](int now) {
    return keep_global_batch(config, keep_global_batch_on, ranks, now);
  };
  const tandem::train::SavedCheckpoints progress(config.checkpoint.dir, metrics.tensorboard_dir);
  return jobs::launch_job(plan, restarts, progress, "tandem-train");
}

// One rank (or the only process): build the trainer and run it (jobs/rank_main.h records how it
// ended). `step` is the step it trains, for a failure's record: -1 until training began.
jobs::RankEnd train(tandem::parallel::ProcessGroup& group, const Args& args, int64_t& step) {
  auto config = tandem::config::load_config(args.config_path, args.overrides);
  if (!args.launch.ranks.empty() && args.launch.ranks != "auto" &&
      resolve_ranks(args, config) != group.size()) {
    throw std::invalid_argument(
        "--ranks " + args.launch.ranks + " but this job has " + std::to_string(group.size()) +
        " rank(s) from its launcher (mpirun -np, srun); give one or the other");
  }
  if (args.print_config) {
    if (group.rank() == 0) std::cout << tandem::config::to_yaml(config);
    return {};
  }
  if (const std::string hint = jobs::unsafe_stop_hint(); !hint.empty() && group.rank() == 0) {
    tandem::log::warn(hint);
  }
  tandem::train::Trainer trainer(std::move(config), group, args.resume);
  try {
    const int code = trainer.run();
    return {code, trainer.step(), jobs::stop_signal()};
  } catch (...) {
    step = trainer.current_step();
    throw;
  }
}

// The command line's options, into `args`.
void declare_options(CLI::App& app, Args& args) {
  app.add_option("--config", args.config_path, "YAML config file")->required();
  app.add_option("--set", args.overrides, "override a config key: key.path=value (repeatable)");
  app.add_option("--resume", args.resume.path,
                 "resume from this checkpoint instead of the newest in checkpoint.dir");
  app.add_flag("--reset-optimizer", args.resume.reset_optimizer,
               "on resume, start Adam's moments afresh (fine-tuning)");
  app.add_flag("--reset-data", args.resume.reset_data,
               "on resume, start from the first batch of epoch 1 (e.g. with a new corpus)");
  jobs::add_launch_flags(app, args.launch, "one per GPU, or per train.threads cores",
                          "its newest checkpoint (the launcher runs where checkpoint.dir is)");
  app.add_flag("--keep-global-batch,!--no-keep-global-batch", args.keep_global_batch,
               "relaunched with fewer ranks, raise train.accum_steps to keep the tokens per step "
               "(default on)");
  app.add_flag("--print-config", args.print_config, "print the resolved config and exit");
  app.footer(kExamples);
}

// TANDEM_CPU_KERNELS, when set, names a kernel path this CPU executes (docs/configs.md), or it is a
// usage error: validation's decoding would meet it only at its first step.
void check_cpu_kernels() {
  try {
    tandem::kernels::cpu_path();
  } catch (const std::invalid_argument& e) {
    throw CLI::ValidationError(e.what());
  }
}

// The launcher (--ranks or --hostfile, not started as a rank), unless the job is one rank that
// runs here; else this process is one rank of the job (or the only one).
int run(int argc, char** argv, const Args& args) {
  if (args.launch.launcher() && !jobs::started_as_rank() && !args.print_config) {
    const int code = cli::run_tool("tandem-train", [&] {
      const auto config = tandem::config::load_config(args.config_path, args.overrides);
      std::vector<jobs::Host> hosts;
      if (!args.launch.hostfile.empty()) hosts = jobs::read_hostfile(args.launch.hostfile);
      const int ranks = hosts.empty() ? resolve_ranks(args, config) : jobs::total_slots(hosts);
      const auto restarts = jobs::restart_options(args.launch, ranks);
      // One rank runs in this process, unless it is to be restarted: then under mpirun too.
      return ranks > 1 || restarts.max_restarts > 0 || !hosts.empty()
                 ? launch(argc, argv, ranks, hosts, config, restarts, args.keep_global_batch)
                 : -1;
    });
    if (code != -1) return code;  // else: one rank, in this process
  }
  tandem::parallel::ProcessGroup group(&argc, &argv);
  return jobs::run_rank(group.seat(), jobs::JobUnit::kStep,
                        [&](int64_t& step) { return train(group, args, step); });
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Train an encoder-decoder Transformer (data parallel, N ranks)."};
  Args args;
  declare_options(app, args);
  if (const auto done = cli::parse_command_line(app, "tandem-train", argc, argv, [&] {
        jobs::check_launch_flags(args.launch);
        check_cpu_kernels();
      })) {
    return *done;
  }
  return run(argc, argv, args);
}
