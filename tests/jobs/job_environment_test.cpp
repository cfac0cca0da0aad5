// What a job reads from its environment: the stop grace, what --ranks auto means, how a rank
// knows it was launched, and when plain mpirun earns the safe-stop hint.
#include "trainer/jobs/job_environment.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "tests/jobs/scoped_env.h"
#include "trainer/jobs/process.h"

namespace tandem::jobs {
namespace {

TEST(JobEnvironment, TheGraceComesFromTheEnvironmentWhenValid) {
  {
    const ScopedEnv grace("TANDEM_STOP_GRACE", nullptr);
    EXPECT_EQ(stop_grace_s(), kStopGraceS);
  }
  {
    const ScopedEnv grace("TANDEM_STOP_GRACE", "45");
    EXPECT_EQ(stop_grace_s(), 45);
  }
  for (const char* bad : {"0", "-3", "ten", "5s"}) {
    const ScopedEnv grace("TANDEM_STOP_GRACE", bad);
    EXPECT_THROW(stop_grace_s(), std::invalid_argument) << bad;
  }
}

TEST(JobEnvironment, AutoIsOneRankPerGpuElsePerThreadsCores) {
  EXPECT_EQ(auto_ranks(4, 1), 4);
  EXPECT_EQ(auto_ranks(0, 1), usable_cores());
  EXPECT_EQ(auto_ranks(0, 1000), 1);  // never none
}

TEST(JobEnvironment, ARankKnowsItWasLaunched) {
  const ScopedEnv a("OMPI_COMM_WORLD_SIZE", nullptr), b("PMI_SIZE", nullptr),
      c("PMIX_RANK", nullptr), d("SLURM_PROCID", nullptr), e("SLURM_STEP_ID", nullptr),
      f("SLURM_STEP_NUM_TASKS", nullptr);
  EXPECT_FALSE(started_as_rank());
  {
    const ScopedEnv mpirun("OMPI_COMM_WORLD_SIZE", "2");
    EXPECT_TRUE(started_as_rank());
  }
  // A SLURM batch script (SLURM 22.05's environment there): not a rank, it starts them.
  const ScopedEnv procid("SLURM_PROCID", "0"), ntasks("SLURM_NTASKS", "2");
  EXPECT_FALSE(started_as_rank());
  // One task of a two-task srun step: a rank.
  const ScopedEnv step("SLURM_STEP_ID", "0"), tasks("SLURM_STEP_NUM_TASKS", "2");
  EXPECT_TRUE(started_as_rank());
  // The one task of a one-task step (srun -n 1 tandem-train --ranks 4): starts them.
  const ScopedEnv one("SLURM_STEP_NUM_TASKS", "1");
  EXPECT_FALSE(started_as_rank());
}

TEST(JobEnvironment, PlainMpirunWithAShortGraceGetsTheSafeStopHint) {
  const ScopedEnv grace("OMPI_MCA_odls_base_sigkill_timeout", nullptr);
  {
    const ScopedEnv not_mpirun("OMPI_MCA_orte_hnp_uri", nullptr);
    EXPECT_EQ(unsafe_stop_hint(), "");  // srun, or no launcher at all
  }
  const ScopedEnv mpirun("OMPI_MCA_orte_hnp_uri", "123.0;tcp://10.0.0.1:4000");
  const std::string hint = unsafe_stop_hint();
  EXPECT_NE(hint.find("mpirun gives the ranks 1 s between SIGTERM and SIGKILL"), std::string::npos)
      << hint;
  EXPECT_NE(hint.find("tandem-train --ranks N"), std::string::npos) << hint;
  EXPECT_NE(hint.find("kill -USR1 <mpirun pid>"), std::string::npos) << hint;
  const ScopedEnv enough("OMPI_MCA_odls_base_sigkill_timeout", std::to_string(kStopGraceS).c_str());
  EXPECT_EQ(unsafe_stop_hint(), "");
}

}  // namespace
}  // namespace tandem::jobs
