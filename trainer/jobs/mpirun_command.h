// The mpirun command line of a job, as a careful user would write it: N ranks on this machine,
// pinned to cores when they fit, or one rank per slot of a hostfile's hosts; the stop grace, the
// variables the ranks need, and Open MPI's root variables when run as root.
#pragma once

#include <string>
#include <vector>

#include "trainer/jobs/job_environment.h"

namespace tandem::jobs {

struct MpirunCommand {
  std::vector<std::string> argv;
  // NAME=VALUE: what mpirun itself needs in its environment beside this process's (as root, Open
  // MPI's OMPI_ALLOW_RUN_AS_ROOT and _CONFIRM); whoever starts it adds them (run_process,
  // run_job), this process's environment is left as it is.
  std::vector<std::string> environment;
  std::string binding;  // the binding flags, for the report
  std::string why;      // e.g. "2 rank(s) x 1 thread(s) and 2 usable core(s): ranks pinned"
};

// "mpirun --oversubscribe -np N <binding> --mca odls_base_sigkill_timeout G -x VAR ..." for N ranks
// of T threads: pinned to T cores each when N x T fits the usable cores, unpinned otherwise.
// `forward_env` says what the ranks get, in mpirun's -x forms: "NAME" passes this process's value
// on (skipped when unset here), "NAME=VALUE" sets one.
MpirunCommand mpirun_command(int ranks, int threads, const std::vector<std::string>& forward_env,
                             int grace_s = stop_grace_s());

// Variables passed on to the ranks on other hosts, when set here: library paths (relocated
// installs), NCCL's and CUDA's settings, the test-only fault injection.
extern const std::vector<std::string> kHostsEnvironment;

// "mpirun --hostfile H -np N --map-by slot --bind-to none --mca odls_base_sigkill_timeout G -x ..."
// for N ranks across the hosts of the hostfile H, one per slot; with TANDEM_IFACE set, MPI's,
// Open MPI's and NCCL's traffic kept to that network interface. Forwards `forward_env` (as
// mpirun_command does) and kHostsEnvironment (those set here).
MpirunCommand mpirun_hosts_command(const std::string& hostfile, int ranks,
                                   const std::vector<std::string>& forward_env,
                                   int grace_s = stop_grace_s());

}  // namespace tandem::jobs
