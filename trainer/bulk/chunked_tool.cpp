#include "trainer/bulk/chunked_tool.h"

#include <torch/cuda.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "trainer/bulk/chunk_store.h"
#include "trainer/bulk/saved_chunks.h"
#include "trainer/cli/tool_main.h"
#include "trainer/jobs/hosts.h"
#include "trainer/jobs/job_environment.h"
#include "trainer/jobs/job_lock.h"
#include "trainer/jobs/process.h"
#include "trainer/jobs/rank_main.h"
#include "trainer/jobs/stop_handler.h"

namespace tandem::bulk {
namespace {

bool same_file(const std::string& a, const std::string& b) {
  std::error_code error;
  return std::filesystem::equivalent(a, b, error);
}

// Says so and returns true when the output is already this job's, whole.
bool already_complete(const ChunkedJob& job, const JobFiles& files) {
  if (files.state != OutputState::kComplete) return false;
  std::fprintf(stderr, "%s: %s is complete (%lld lines; recorded in %s): nothing to do\n",
               job.tool.c_str(), job.output.c_str(),
               static_cast<long long>(files.inputs.front().lines), record_path(job.output).c_str());
  return true;
}

// The threads of each of `ranks` ranks on this machine: as given, else the usable cores shared.
int threads_per_rank(int threads, int ranks, bool hosts, int gpus) {
  if (threads > 0) return threads;
  if (gpus > 0 || hosts) return 1;
  return std::max(1, jobs::usable_cores() / std::max(1, ranks));
}

}  // namespace

CLI::Option* add_chunk_flags(CLI::App& app, ChunkedJob& job, const std::string& chunk_help,
                             const std::string& more) {
  const std::string help = chunk_help + " (default " + std::to_string(kChunkLines) + ")";
  auto* chunk_lines =
      app.add_option("--chunk-lines", job.chunk_lines, more.empty() ? help : help + "; " + more);
  chunk_lines->check(tandem::cli::kPositive);
  app.add_option("--progress-s", job.progress_s,
                 "with --output: at most one progress line (chunks, lines, lines/s, ETA) per this "
                 "many seconds")
      ->capture_default_str()
      ->check(tandem::cli::kPositive);
  app.add_option("--timeout-s", job.timeout_s,
                 "with --output: a rank that holds its chunk this long, or waits this long for "
                 "rank 0's answer, ends the job as dead or stuck (a relaunch then redoes the "
                 "chunk); 0: 10 times the slowest chunk so far, at least 300")
      ->capture_default_str()
      ->check(tandem::cli::kNonNegative);
  return chunk_lines;
}

JobFiles job_files(const ChunkedJob& job) {
  JobFiles files;
  files.output = job.output;
  files.record.tool = job.tool;
  files.record.chunk_lines = job.chunk_lines;
  files.record.options = job.options;
  for (const auto& [flag, path] : job.inputs) {
    if (same_file(path, job.output)) {
      throw std::invalid_argument("--output '" + job.output + "' is " + flag + " '" + path +
                                  "': name another output");
    }
    files.inputs.push_back(index_lines(path, job.chunk_lines, flag));
    files.record.inputs.push_back(input_identity(files.inputs.back()));
    if (files.inputs.back().lines != files.inputs.front().lines) {
      throw std::invalid_argument(flag + " '" + path + "' has " +
                                  std::to_string(files.inputs.back().lines) + " lines but " +
                                  job.inputs.front().first + " '" + job.inputs.front().second +
                                  "' has " + std::to_string(files.inputs.front().lines));
    }
  }
  for (const auto& path : job.checkpoints) files.record.models.push_back(model_identity(path));
  if (!job.output.empty()) files.state = inspect_output(job.output, files.record);
  return files;
}

int launch_chunked(int argc, char** argv, const ChunkedJob& job, const jobs::LaunchFlags& launch,
                   int threads, int gpus) {
  const JobFiles files = job_files(job);
  if (already_complete(job, files)) return 0;
  { const jobs::JobLock free_now(jobs::output_target(job.output)); }  // no job on it now
  jobs::JobPlan plan;
  if (!launch.hostfile.empty()) plan.hosts = jobs::read_hostfile(launch.hostfile);
  const int auto_count = gpus > 0 ? gpus : jobs::auto_ranks(0, std::max(1, threads));
  plan.ranks = plan.hosts.empty() ? jobs::requested_ranks(launch, auto_count)
                                  : jobs::total_slots(plan.hosts);
  plan.threads = threads_per_rank(threads, plan.ranks, !plan.hosts.empty(), gpus);
  const jobs::RestartOptions restarts = jobs::restart_options(launch, plan.ranks);
  plan.forward_env = {"OMP_NUM_THREADS=1", "OPENBLAS_NUM_THREADS=1"};
  plan.rank_command = {jobs::self_executable()};
  plan.rank_command.insert(plan.rank_command.end(), argv + 1, argv + argc);
  if (threads == 0)
    plan.rank_command.insert(plan.rank_command.end(), {"--threads", std::to_string(plan.threads)});
  const SavedChunks progress(job.output, files.inputs.front().count());
  return jobs::launch_job(plan, restarts, progress, job.tool);
}

int run_chunked_rank(int* argc, char*** argv, const ChunkedJob& job,
                     const std::function<ChunkFunction(parallel::ProcessGroup&)>& load) {
  parallel::ProcessGroup group(argc, argv);
  jobs::install_stop_signal_handlers();
  return jobs::run_rank(group.seat(), jobs::JobUnit::kChunk, [&](int64_t& at) -> jobs::RankEnd {
    ChunkJob chunks(group, job.tool, job.progress_s, job.timeout_s);
    try {
      JobFiles files;
      uint64_t complete = 0;
      std::unique_ptr<jobs::JobLock> lock;  // rank 0's, for as long as the job runs
      if (group.rank() == 0) {
        lock = std::make_unique<jobs::JobLock>(jobs::output_target(job.output));
        files = job_files(job);
        complete = already_complete(job, files) ? 1 : 0;
      }
      if (group.size() > 1) complete = group.cpu().all_gather(complete).front();
      if (complete != 0) return {};
      const JobOutcome outcome = chunks.run(files, [&] { return load(group); });
      return {jobs::stopped_exit_status(outcome.stop_signal), outcome.chunks_done,
              outcome.stop_signal};
    } catch (...) {
      at = chunks.current_chunk();
      throw;
    }
  });
}

void check_file_tool(const FileTool& tool) {
  if (tool.launch.launcher() && tool.job.output.empty()) {
    throw CLI::ValidationError("--ranks and --hostfile " + tool.words.launcher_does + ": give " +
                               tool.words.output_flags);
  }
  if (tool.job.output.empty() && jobs::started_as_rank()) {
    throw CLI::ValidationError("as a rank of an mpirun or srun job, give " +
                               tool.words.output_flags + ": " + tool.words.rank_needs);
  }
}

int run_file_tool(int argc, char** argv, const FileTool& tool) {
  if (tool.launch.launcher() && !jobs::started_as_rank()) {
    return cli::run_tool(tool.job.tool, [&] {
      const int gpus = tool.device != "cpu" && torch::cuda::is_available()
                           ? static_cast<int>(torch::cuda::device_count())
                           : 0;
      return launch_chunked(argc, argv, tool.job, tool.launch, tool.threads, gpus);
    });
  }
  if (!tool.job.output.empty()) return run_chunked_rank(&argc, &argv, tool.job, tool.load);
  return cli::run_tool(tool.job.tool, tool.to_stdout);
}

}  // namespace tandem::bulk
