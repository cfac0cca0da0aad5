// What tandem-decode and tandem-score share when they work through files in chunks
// (bulk/chunk_job.h): the job as their flags describe it, the launcher's side (every check that
// can fail before a rank starts, a finished output left as it is, then mpirun with restarts), and
// one rank's side (the job run, its state record for the launcher, its failure ending the job).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/bulk/chunk_job.h"
#include "trainer/parallel/process_group.h"
#include "trainer/jobs/launcher_flags.h"

namespace tandem::jobs {

// The default of --chunk-lines for a job with --output.
constexpr int64_t kChunkLines = 2000;

struct ChunkedJob {
  std::string tool;                                         // "tandem-decode"
  std::vector<std::pair<std::string, std::string>> inputs;  // (flag, path): ("--input", "mono.es")
  std::string output;
  int64_t chunk_lines = kChunkLines;                        // --chunk-lines
  double progress_s = 10;                // at most one progress line per this many seconds
  double timeout_s = 0;                  // bulk::ChunkJob's: 0 from the chunks' times
  std::vector<std::string> checkpoints;  // the models, for the job's record
  std::vector<std::pair<std::string, std::string>> options;  // what shapes the output
};

// --chunk-lines (into job.chunk_lines), --progress-s and --timeout-s of a job with --output (the
// tools' own --output and --input flags name the files); `chunk_help` says what a chunk is to the
// tool, the default follows it, then `more` where the flag serves another mode too. Returns the
// --chunk-lines option, whose count() says whether it was given.
CLI::Option* add_chunk_flags(CLI::App& app, ChunkedJob& job, const std::string& chunk_help,
                             const std::string& more = "");

// The job's inputs indexed and its record; std::invalid_argument when an input cannot be read,
// the inputs' line counts differ, or the output is one of them.
bulk::JobFiles job_files(const ChunkedJob& job);

// The launcher (--ranks or --hostfile, not started as a rank): the checks, then this same command
// line (`argv`) as every rank of an mpirun job with `threads` threads each (0: the usable cores
// shared out; `--threads` is added to the ranks' command line then), supervised and relaunched
// as `launch` asks. `gpus`: the GPUs a rank per GPU would use (--ranks auto), 0 for the CPU.
int launch_chunked(int argc, char** argv, const ChunkedJob& job, const LaunchFlags& launch,
                   int threads, int gpus);

// One rank of the job, or the only process: its ProcessGroup made from `argc`/`argv`, the job
// run (`load` makes what the rank does with each chunk), the rank's state record; a failure is
// logged and ends the whole job with its exit code. Returns the process's exit code.
int run_chunked_rank(int* argc, char*** argv, const ChunkedJob& job,
                     const std::function<bulk::ChunkFunction(parallel::ProcessGroup&)>& load);

}  // namespace tandem::jobs
