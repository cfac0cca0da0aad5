// What the tools need from the operating system: child processes, executables on PATH, this
// executable, the usable cores, a free local port and the peak RSS.
#pragma once

#include <string>
#include <vector>

namespace tandem::jobs {

// Runs argv[0] (searched on PATH) with argv and this process's environment with `environment`'s
// NAME=VALUE entries added (replacing those names), stdout to `stdout_path` when given (else
// inherited); returns its exit code (128 + signal when killed). std::runtime_error when it cannot
// start.
int run_process(const std::vector<std::string>& argv, const std::string& stdout_path = "",
                const std::vector<std::string>& environment = {});

// This process's environment (NAME=VALUE entries) with `added`'s entries in place of those of
// the same names and the variables `removed` names left out: what a child started so sees.
std::vector<std::string> environment_with(const std::vector<std::string>& added,
                                          const std::vector<std::string>& removed = {});

// A command line and the environment it runs with, as execvpe takes them, made before a fork so
// that the child calls nothing that allocates before its exec.
class ExecArgs {
 public:
  ExecArgs(std::vector<std::string> argv, std::vector<std::string> environment);
  ExecArgs(const ExecArgs&) = delete;
  ExecArgs& operator=(const ExecArgs&) = delete;
  // In the child: replaces it by argv[0] (searched on PATH); on failure says so on standard error
  // and _exits 127.
  [[noreturn]] void exec() const;

 private:
  std::vector<std::string> argv_, environment_;
  std::vector<char*> args_, envp_;
};

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
