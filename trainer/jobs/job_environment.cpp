#include "trainer/jobs/job_environment.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "trainer/common/whole_number.h"
#include "trainer/jobs/process.h"

namespace tandem::jobs {

int stop_grace_s() {
  const char* text = std::getenv("TANDEM_STOP_GRACE");
  if (text == nullptr || *text == '\0') return kStopGraceS;
  const auto seconds = parse_whole_number(text);
  if (!seconds || *seconds < 1 || *seconds > 86400) {
    throw std::invalid_argument(std::string("TANDEM_STOP_GRACE='") + text +
                                "': expected whole seconds from 1 to 86400");
  }
  return static_cast<int>(*seconds);
}

// SLURM sets SLURM_PROCID in a batch script too (0): only a task of a job step that srun started
// with several tasks is a rank. The batch script, salloc's shell and a one-task step (srun -n 1
// tandem-train --ranks 4) start the ranks themselves. (Seen with SLURM 22.05: the batch script
// has SLURM_PROCID and no SLURM_STEP_ID; srun's tasks have both, and SLURM_STEP_NUM_TASKS.)
bool started_as_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  const char* step = std::getenv("SLURM_STEP_ID");
  const char* tasks = std::getenv("SLURM_STEP_NUM_TASKS");
  return step != nullptr && tasks != nullptr && std::atoi(tasks) > 1;
}

int auto_ranks(int gpus, int threads) {
  if (gpus > 0) return gpus;
  return std::max(1, usable_cores() / std::max(1, threads));
}

std::string unsafe_stop_hint() {
  if (std::getenv("OMPI_MCA_orte_hnp_uri") == nullptr) return "";  // not Open MPI's mpirun
  const char* grace = std::getenv("OMPI_MCA_odls_base_sigkill_timeout");
  if (grace != nullptr && std::atof(grace) >= kStopGraceS) return "";
  return "mpirun gives the ranks " + std::string(grace != nullptr ? grace : "1") +
         " s between SIGTERM and SIGKILL, so a SIGTERM or Ctrl-C to mpirun loses the steps since "
         "the last checkpoint. HINT: start with `tandem-train --ranks N` instead, or add `--mca "
         "odls_base_sigkill_timeout " +
         std::to_string(kStopGraceS) + "` to mpirun, or stop with `kill -USR1 <mpirun pid>`";
}

}  // namespace tandem::jobs
