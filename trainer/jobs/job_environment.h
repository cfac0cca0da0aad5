// What a Tandem job reads from its environment: the stop grace (TANDEM_STOP_GRACE), whether this
// process is one rank of a job a launcher started, how many ranks --ranks auto means, and whether
// the mpirun that started it stops the ranks too soon for a save.
#pragma once

#include <string>

namespace tandem::jobs {

// Seconds between the SIGTERM and the SIGKILL that Open MPI sends the ranks when mpirun itself is
// signalled (odls_base_sigkill_timeout; Open MPI's default is 1): enough to finish a step and save
// a model of the base shape on a local disk. Open MPI also waits as long before that SIGTERM, and
// twice as long before ending a job whose rank failed while the others still run (measured with
// Open MPI 4.1: about 40 s at 20), so it is not larger; run_job's stops do not depend on it.
constexpr int kStopGraceS = 10;

// TANDEM_STOP_GRACE (whole seconds >= 1) when set, else kStopGraceS; std::invalid_argument for a
// malformed value.
int stop_grace_s();

// Whether a launcher (mpirun, srun, ...) started this process as one rank of a job: not a SLURM
// batch script, salloc's shell or a step of one task, which start the ranks themselves.
bool started_as_rank();

// What `--ranks auto` means: one rank per GPU when `gpus` > 0, else one per `threads` usable cores.
int auto_ranks(int gpus, int threads);

// Under Open MPI's mpirun with a grace shorter than kStopGraceS: one line on how to stop safely; ""
// when the job was started otherwise (the launcher, srun, no launcher) or with a longer grace.
std::string unsafe_stop_hint();

}  // namespace tandem::jobs
