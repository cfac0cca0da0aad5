// Supervising a job mpirun runs: staying its parent so that a stop signal ends with what every
// rank saved on disk (a checkpoint, a file job's chunks), relaying its standard error, and ending
// it when it hangs after a failure.
#pragma once

#include <string>
#include <vector>

namespace tandem::jobs {

// How a job run_job ran ended.
struct JobResult {
  int status = 0;       // mpirun's exit status (128 + signal when a signal ended it)
  int stop_signal = 0;  // the first stop signal (jobs/stop_signals.h) passed on; 0: none came
  std::vector<std::string> last_lines;  // the end of mpirun's standard error (ranks' included)
  // What the launcher exits with: 128 + the stop signal when one stopped the job, else status.
  int exit_code() const { return stop_signal != 0 ? 128 + stop_signal : status; }
};

// Lines of mpirun's standard error that JobResult keeps: enough for its and the ranks' last words.
constexpr size_t kKeptLines = 400;

// Runs `argv` (an mpirun command) and stays its parent: a stop signal (kStopSignals) reaches every
// rank as kLauncherStopSignal (finish the step or chunk, save, exit 0), a second one from the same
// sender stops them at once, a third kills the job; it returns only when mpirun has, so after what
// the ranks saved is on disk. mpirun's stdin is /dev/null and its process group its own (so a
// terminal's Ctrl-C reaches only this process, which passes it on). mpirun's
// standard error passes through this process unchanged, line for line, so that its end can be
// read afterwards; what is left of the job's process group once mpirun has exited is killed. Once
// mpirun has said the job failed, it gets kTeardownS + twice the stop grace to end (it can wait
// far longer for a host that no longer answers); then its process group is killed.
constexpr int kTeardownS = 30;
// The launcher's words on a stop: what the ranks do with the first signal, and what a second one
// leaves intact (each job's SavedProgress names them).
struct StopWords {
  std::string first, kept;
};
// `environment`: NAME=VALUE entries mpirun gets beside this process's environment.
JobResult run_job(const std::vector<std::string>& argv, const std::vector<std::string>& environment,
                  const std::string& tool, const StopWords& words);

}  // namespace tandem::jobs
