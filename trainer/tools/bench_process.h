// What tandem-bench needs from the operating system: child processes, mpirun command lines with a
// core binding that fits the machine, a scratch directory, and its own peak RSS.
#pragma once

#include <string>
#include <vector>

namespace tandem::tools {

// Runs argv[0] (searched on PATH) with argv, stdout to `stdout_path` when given (else inherited);
// returns its exit code (128 + signal when killed). std::runtime_error when it cannot start.
int run_process(const std::vector<std::string>& argv, const std::string& stdout_path = "");

// The full path of `program` on PATH, or "" when it is not there.
std::string find_on_path(const std::string& program);

// This executable's path (/proc/self/exe).
std::string self_executable();

// Physical cores this process may run on (distinct core ids in its CPU affinity mask).
int usable_cores();

// A TCP port on 127.0.0.1 that was free a moment ago (for a rendezvous such as
// torch.distributed's).
int free_local_port();

// Peak resident set size of this process so far, in MiB (getrusage ru_maxrss).
double peak_rss_mb();

// "mpirun --oversubscribe -np N <binding> -x VAR ..." for N ranks of T threads: ranks pinned to
// T cores each when N x T fits the usable cores, unpinned otherwise. `forward_env` names
// variables passed to the ranks (those unset here are skipped).
struct MpirunCommand {
  std::vector<std::string> argv;
  std::string binding;  // the binding flags, for the report
  std::string why;      // e.g. "2 ranks x 1 thread fit 2 cores"
};
MpirunCommand mpirun_command(int ranks, int threads, const std::vector<std::string>& forward_env);

}  // namespace tandem::tools
