// Starting a job of N ranks on this machine as a careful user would call mpirun, and staying its
// parent so that a stop signal ends with every rank's checkpoint on disk.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace tandem::tools {

// Starting a job of N ranks on this machine as a careful user would call mpirun: ranks pinned to
// cores when they fit, the threads per rank in their environment, Open MPI's root variables when
// run as root, and a SIGKILL grace long enough for a save. run_job stays the job's parent: a
// SIGTERM, SIGINT or SIGHUP reaches every rank as SIGUSR2 (finish the step, save, exit 0), a second
// one stops them at once, and it returns only when mpirun has, so after the checkpoint is on disk.

// Seconds between the SIGTERM and the SIGKILL that Open MPI sends the ranks when mpirun itself is
// signalled (odls_base_sigkill_timeout; Open MPI's default is 1): enough to finish a step and save
// a model of the base shape on a local disk. Open MPI also waits as long before that SIGTERM, and
// twice as long before ending a job whose rank failed while the others still run (measured with
// Open MPI 4.1: about 40 s at 20), so it is not larger; run_job's stops do not depend on it.
constexpr int kStopGraceS = 10;

// TANDEM_STOP_GRACE (whole seconds >= 1) when set, else kStopGraceS; std::invalid_argument for a
// malformed value.
int stop_grace_s();

struct MpirunCommand {
  std::vector<std::string> argv;
  std::string binding;  // the binding flags, for the report
  std::string why;      // e.g. "2 rank(s) x 1 thread(s) and 2 usable core(s): ranks pinned"
};

// "mpirun --oversubscribe -np N <binding> --mca odls_base_sigkill_timeout G -x VAR ..." for N ranks
// of T threads: pinned to T cores each when N x T fits the usable cores, unpinned otherwise.
// `forward_env` names variables passed to the ranks (those unset here are skipped). As root it
// sets OMPI_ALLOW_RUN_AS_ROOT(_CONFIRM) in this process's environment, which mpirun inherits.
MpirunCommand mpirun_command(int ranks, int threads, const std::vector<std::string>& forward_env,
                             int grace_s = stop_grace_s());

// Variables passed on to the ranks on other hosts, when set here: library paths (relocated
// installs), NCCL's and CUDA's settings, the test-only fault injection.
extern const std::vector<std::string> kHostsEnvironment;

// "mpirun --hostfile H -np N --map-by slot --bind-to none --mca odls_base_sigkill_timeout G -x ..."
// for N ranks across the hosts of the hostfile H, one per slot; with TANDEM_IFACE set, MPI's,
// Open MPI's and NCCL's traffic kept to that network interface. Forwards `forward_env` and
// kHostsEnvironment (those set here).
MpirunCommand mpirun_hosts_command(const std::string& hostfile, int ranks,
                                   const std::vector<std::string>& forward_env,
                                   int grace_s = stop_grace_s());

// Whether a launcher (mpirun, srun, ...) started this process as one rank of a job: not a SLURM
// batch script, salloc's shell or a step of one task, which start the ranks themselves.
bool started_as_rank();

// What `--ranks auto` means: one rank per GPU when `gpus` > 0, else one per `threads` usable cores.
int auto_ranks(int gpus, int threads);

// "SIGTERM", "SIGINT" or "SIGHUP"; "a signal" for another.
const char* signal_name(int sig);

// How a job run_job ran ended.
struct JobResult {
  int status = 0;       // mpirun's exit status (128 + signal when a signal ended it)
  int stop_signal = 0;  // the first stop signal (SIGTERM, SIGINT, SIGHUP) passed on; 0: none came
  std::filesystem::file_time_type stop_time;  // when it came, on the clock of files' times
  std::vector<std::string> last_lines;  // the end of mpirun's standard error (ranks' included)
  // What the launcher exits with: 128 + the stop signal when one stopped the job, else status.
  int exit_code() const { return stop_signal != 0 ? 128 + stop_signal : status; }
};

// Lines of mpirun's standard error that JobResult keeps: enough for its and the ranks' last words.
constexpr size_t kKeptLines = 400;

// Runs `argv` (an mpirun command) as described above, its stdin /dev/null and its process group
// its own (so a terminal's Ctrl-C reaches only this process, which passes it on). mpirun's
// standard error passes through this process unchanged, line for line, so that its end can be
// read afterwards; what is left of the job's process group once mpirun has exited is killed. Once
// mpirun has said the job failed, it gets kTeardownS + twice the stop grace to end (it can wait
// far longer for a host that no longer answers); then its process group is killed.
constexpr int kTeardownS = 30;
JobResult run_job(const std::vector<std::string>& argv, const std::string& tool);

// Under Open MPI's mpirun with a grace shorter than kStopGraceS: one line on how to stop safely; ""
// when the job was started otherwise (the launcher, srun, no launcher) or with a longer grace.
std::string unsafe_stop_hint();

}  // namespace tandem::tools
