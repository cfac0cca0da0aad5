// The launcher's pieces that need no job: the mpirun command line it builds, what --ranks auto
// means, how a rank knows it was launched, and when plain mpirun earns the safe-stop hint.
#include "trainer/tools/launcher.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "trainer/tools/process.h"

namespace tandem::tools {
namespace {

// Sets (or, with nullptr, unsets) an environment variable for one test, restoring it afterwards.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    value != nullptr ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { had_ ? setenv(name_.c_str(), old_.c_str(), 1) : unsetenv(name_.c_str()); }

 private:
  std::string name_, old_;
  bool had_ = false;
};

bool contains(const std::vector<std::string>& argv, const std::vector<std::string>& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

TEST(Launcher, MpirunPinsRanksThatFitPassesTheGraceAndForwardsWhatIsSet) {
  const ScopedEnv set("TANDEM_TEST_FORWARDED", "1");
  const ScopedEnv unset("TANDEM_TEST_UNSET", nullptr);
  const auto fits = mpirun_command(1, 1, {"TANDEM_TEST_FORWARDED", "TANDEM_TEST_UNSET"}, 17);
  EXPECT_EQ(fits.argv[0], find_on_path("mpirun"));
  EXPECT_TRUE(contains(fits.argv, {"--oversubscribe", "-np", "1", "--bind-to", "core"}));
  EXPECT_TRUE(contains(fits.argv, {"--mca", "odls_base_sigkill_timeout", "17"}));
  EXPECT_TRUE(contains(fits.argv, {"-x", "TANDEM_TEST_FORWARDED"}));
  EXPECT_FALSE(contains(fits.argv, {"-x", "TANDEM_TEST_UNSET"}));
  if (geteuid() == 0) {
    EXPECT_TRUE(contains(fits.argv, {"-x", "OMPI_ALLOW_RUN_AS_ROOT"}));
  }
  const int cores = usable_cores();
  const auto crowded = mpirun_command(cores + 1, 1, {});
  EXPECT_TRUE(contains(crowded.argv, {"--bind-to", "none"})) << crowded.why;
  EXPECT_TRUE(
      contains(crowded.argv, {"--mca", "odls_base_sigkill_timeout", std::to_string(kStopGraceS)}));
  if (cores >= 2) {
    EXPECT_TRUE(contains(mpirun_command(1, 2, {}).argv, {"--map-by", "slot:PE=2"}));
  }
}

TEST(Launcher, AcrossHostsOneRankPerSlotOnTheInterfaceAskedFor) {
  const ScopedEnv iface("TANDEM_IFACE", "ib0");
  const ScopedEnv path("LD_LIBRARY_PATH", "/opt/tandem/lib");
  const ScopedEnv nccl("NCCL_IB_DISABLE", nullptr);
  const auto command = mpirun_hosts_command("/tmp/hosts", 16, {"TANDEM_TEST_UNSET"}, 12);
  EXPECT_EQ(command.argv[0], find_on_path("mpirun"));
  EXPECT_TRUE(contains(command.argv, {"--hostfile", "/tmp/hosts", "-np", "16", "--map-by", "slot",
                                      "--bind-to", "none"}));
  EXPECT_TRUE(contains(command.argv, {"--mca", "odls_base_sigkill_timeout", "12"}));
  EXPECT_TRUE(contains(command.argv, {"--mca", "btl_tcp_if_include", "ib0"}));
  EXPECT_TRUE(contains(command.argv, {"--mca", "oob_tcp_if_include", "ib0"}));
  EXPECT_TRUE(contains(command.argv, {"-x", "NCCL_SOCKET_IFNAME=ib0"}));
  EXPECT_TRUE(contains(command.argv, {"-x", "LD_LIBRARY_PATH"}));
  EXPECT_FALSE(contains(command.argv, {"-x", "NCCL_IB_DISABLE"}));
  EXPECT_FALSE(contains(command.argv, {"-x", "TANDEM_TEST_UNSET"}));
  const ScopedEnv no_iface("TANDEM_IFACE", nullptr);
  EXPECT_FALSE(contains(mpirun_hosts_command("/tmp/hosts", 2, {}).argv, {"btl_tcp_if_include"}));
}

TEST(Launcher, TheGraceComesFromTheEnvironmentWhenValid) {
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

TEST(Launcher, AutoIsOneRankPerGpuElsePerThreadsCores) {
  EXPECT_EQ(auto_ranks(4, 1), 4);
  EXPECT_EQ(auto_ranks(0, 1), usable_cores());
  EXPECT_EQ(auto_ranks(0, 1000), 1);  // never none
}

TEST(Launcher, ARankKnowsItWasLaunched) {
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

TEST(Launcher, PlainMpirunWithAShortGraceGetsTheSafeStopHint) {
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
}  // namespace tandem::tools
