// Starting a job of N ranks on this machine as a careful user would call mpirun, and staying its
// parent so that a stop signal ends with every rank's checkpoint on disk.
#pragma once

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

// Whether a launcher (mpirun, srun, ...) started this process as one rank of a job.
bool started_as_rank();

// What `--ranks auto` means: one rank per GPU when `gpus` > 0, else one per `threads` usable cores.
int auto_ranks(int gpus, int threads);

// Runs `argv` (an mpirun command) as described above, its stdin /dev/null and its process group
// its own (so a terminal's Ctrl-C reaches only this process, which passes it on). Returns mpirun's
// exit status, or 128 + the first stop signal when one stopped the job.
int run_job(const std::vector<std::string>& argv, const std::string& tool);

// Under Open MPI's mpirun with a grace shorter than kStopGraceS: one line on how to stop safely; ""
// when the job was started otherwise (the launcher, srun, no launcher) or with a longer grace.
std::string unsafe_stop_hint();

}  // namespace tandem::tools
