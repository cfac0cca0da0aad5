// The mpirun command lines the launcher builds: N ranks on this machine, pinned when they fit,
// or one rank per slot of a hostfile's hosts; the stop grace and the variables passed on.
#include "trainer/jobs/mpirun_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "tests/jobs/scoped_env.h"
#include "trainer/jobs/process.h"

namespace tandem::jobs {
namespace {

bool contains(const std::vector<std::string>& argv, const std::vector<std::string>& run) {
  return std::search(argv.begin(), argv.end(), run.begin(), run.end()) != argv.end();
}

TEST(MpirunCommand, MpirunPinsRanksThatFitPassesTheGraceAndForwardsWhatIsSet) {
  const ScopedEnv set("TANDEM_TEST_FORWARDED", "1");
  const ScopedEnv unset("TANDEM_TEST_UNSET", nullptr);
  const auto fits = mpirun_command(
      1, 1, {"TANDEM_TEST_FORWARDED", "TANDEM_TEST_UNSET", "TANDEM_TEST_SET=a b"}, 17);
  EXPECT_EQ(fits.argv[0], find_on_path("mpirun"));
  EXPECT_TRUE(contains(fits.argv, {"--oversubscribe", "-np", "1", "--bind-to", "core"}));
  EXPECT_TRUE(contains(fits.argv, {"--mca", "odls_base_sigkill_timeout", "17"}));
  EXPECT_TRUE(contains(fits.argv, {"-x", "TANDEM_TEST_FORWARDED"}));
  EXPECT_FALSE(contains(fits.argv, {"-x", "TANDEM_TEST_UNSET"}));
  EXPECT_TRUE(contains(fits.argv, {"-x", "TANDEM_TEST_SET=a b"}));
  EXPECT_EQ(std::getenv("TANDEM_TEST_SET"), nullptr) << "set for mpirun's ranks, not here";
  if (geteuid() == 0) {
    const ScopedEnv root("OMPI_ALLOW_RUN_AS_ROOT", nullptr);
    const auto command = mpirun_command(1, 1, {});
    EXPECT_TRUE(contains(command.argv, {"-x", "OMPI_ALLOW_RUN_AS_ROOT=1"}));
    EXPECT_TRUE(contains(command.environment, {"OMPI_ALLOW_RUN_AS_ROOT=1"}));
    EXPECT_EQ(std::getenv("OMPI_ALLOW_RUN_AS_ROOT"), nullptr) << "mpirun's, not this process's";
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

TEST(MpirunCommand, AcrossHostsOneRankPerSlotOnTheInterfaceAskedFor) {
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

}  // namespace
}  // namespace tandem::jobs
