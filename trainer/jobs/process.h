// What the tools need from the operating system: child processes, executables on PATH, this
// executable, the usable cores, a free local port and the peak RSS.
#pragma once

#include <string>
#include <vector>

namespace tandem::jobs {

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

}  // namespace tandem::jobs
