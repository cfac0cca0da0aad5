// What tandem-decode and tandem-score share when they work through files in chunks
// (bulk/chunk_job.h): the job as their flags describe it, the launcher's side (every check that
// can fail before a rank starts, a finished output left as it is, then mpirun with restarts), one
// rank's side (the job run as jobs/rank_main.h runs a rank), and the choice between them and
// the tool's standard output (run_file_tool).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/bulk/chunk_job.h"
#include "trainer/jobs/launcher_flags.h"
#include "trainer/parallel/process_group.h"

namespace tandem::bulk {

// The default of --chunk-lines for a job with --output.
constexpr int64_t kChunkLines = 2000;

struct ChunkedJob {
  std::string tool;                                         // "tandem-decode"
  std::vector<std::pair<std::string, std::string>> inputs;  // (flag, path): ("--input", "mono.es")
  std::string output;
  int64_t chunk_lines = kChunkLines;     // --chunk-lines
  double progress_s = 10;                // at most one progress line per this many seconds
  double timeout_s = 0;                  // ChunkJob's: 0 from the chunks' times
  std::vector<std::string> checkpoints;  // the models, for the job's record
  std::vector<std::pair<std::string, std::string>> options;  // what shapes the output
};

// --chunk-lines (into job.chunk_lines), --progress-s and --timeout-s of a job with --output (the
// tools' own --output and --input flags name the files); `chunk_help` says what a chunk is to the
// tool, the default follows it, then `more` where the flag serves another mode too. Returns the
// --chunk-lines option, whose count() says whether it was given.
CLI::Option* add_chunk_flags(CLI::App& app, ChunkedJob& job, const std::string& chunk_help,
                             const std::string& more = "");

// The job's inputs indexed, its record, and what is on disk for its output (inspect_output, read
// once here); std::invalid_argument when an input cannot be read, the inputs' line counts differ,
// the output is one of them, or it is another command's.
JobFiles job_files(const ChunkedJob& job);

// The launcher (--ranks or --hostfile, not started as a rank): the checks, then this same command
// line (`argv`) as every rank of an mpirun job with `threads` threads each (0: the usable cores
// shared out; `--threads` is added to the ranks' command line then), supervised and relaunched
// as `launch` asks. `gpus`: the GPUs a rank per GPU would use (--ranks auto), 0 for the CPU.
int launch_chunked(int argc, char** argv, const ChunkedJob& job, const jobs::LaunchFlags& launch,
                   int threads, int gpus);

// One rank of the job, or the only process: its ProcessGroup made from `argc`/`argv`, the job
// run (`load` makes what the rank does with each chunk), the rank's state record; a failure is
// logged and ends the whole job with its exit code. Returns the process's exit code.
int run_chunked_rank(int* argc, char*** argv, const ChunkedJob& job,
                     const std::function<ChunkFunction(parallel::ProcessGroup&)>& load);

// A tool that writes a line (or lines) per input line: to standard output in one process, or, with
// an output file, as a chunked job of one or more ranks.
struct FileTool {
  // The tool's words for its usage errors: the flags that name the output ("--input and
  // --output"), what the launcher does with it ("translate a file"), and why a rank needs it
  // ("the ranks share a file, not standard input").
  struct Words {
    std::string output_flags, launcher_does, rank_needs;
  };
  ChunkedJob job;            // job.output empty: standard output
  jobs::LaunchFlags launch;  // --ranks, --hostfile, --max-restarts, --min-ranks
  int threads = 1;           // --threads: per rank; 0: the usable cores shared out (launch_chunked)
  std::string device;        // --device: "cpu" or a GPU's; with GPUs, --ranks auto is one per GPU
  Words words;
  std::function<ChunkFunction(parallel::ProcessGroup&)> load;  // a rank's work per chunk
  std::function<int()> to_stdout;  // the one process's work without an output file
};

// The usage errors of a file tool's flags (CLI::ValidationError): a launcher without an output
// file, a rank of an mpirun or srun job without one.
void check_file_tool(const FileTool& tool);

// Runs `tool` (its flags checked) as its flags ask: the launcher (--ranks or --hostfile, not
// started as a rank), a rank of the file job (an output file), or standard output. Returns the
// process's exit code; a failure outside a rank is one "<tool>: error: ..." line.
int run_file_tool(int argc, char** argv, const FileTool& tool);

}  // namespace tandem::bulk
