#include "trainer/jobs/mpirun_command.h"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

#include "trainer/jobs/process.h"

namespace tandem::jobs {
namespace {

std::string mpirun_path() {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw std::runtime_error(
        "mpirun not found on PATH (needed for more than one rank; install "
        "openmpi-bin)");
  }
  return mpirun;
}

// "-x NAME=VALUE" for each such entry of `forward`, "-x NAME" for each name set here; as root,
// Open MPI's root variables in mpirun's environment and passed on.
void forward_variables(const std::vector<std::string>& forward, MpirunCommand& command) {
  std::vector<std::string> entries = forward;
  if (geteuid() == 0) {
    for (const char* name : {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"}) {
      const char* value = std::getenv(name);
      const std::string entry = std::string(name) + "=" + (value != nullptr ? value : "1");
      command.environment.push_back(entry);
      entries.push_back(entry);
    }
  }
  for (const auto& entry : entries) {
    const bool set_here = entry.find('=') != std::string::npos || std::getenv(entry.c_str());
    if (set_here) command.argv.insert(command.argv.end(), {"-x", entry});
  }
}

}  // namespace

MpirunCommand mpirun_command(int ranks, int threads, const std::vector<std::string>& forward_env,
                             int grace_s) {
  MpirunCommand command;
  command.argv = {mpirun_path(), "--oversubscribe", "-np", std::to_string(ranks)};
  const int cores = usable_cores();
  const std::string fit = std::to_string(ranks) + " rank(s) x " + std::to_string(threads) +
                          " thread(s) and " + std::to_string(cores) + " usable core(s)";
  if (ranks * threads <= cores) {
    // One core per thread, so a rank's threads never share a core with another rank's.
    command.binding = threads == 1
                          ? "--bind-to core"
                          : "--map-by slot:PE=" + std::to_string(threads) + " --bind-to core";
    command.why = fit + ": ranks pinned";
  } else {
    command.binding = "--bind-to none";
    command.why = fit + ": more threads than cores, ranks left unpinned";
  }
  for (size_t begin = 0, end; begin < command.binding.size(); begin = end + 1) {
    end = command.binding.find(' ', begin);
    if (end == std::string::npos) end = command.binding.size();
    command.argv.push_back(command.binding.substr(begin, end - begin));
  }
  command.argv.insert(command.argv.end(),
                      {"--mca", "odls_base_sigkill_timeout", std::to_string(grace_s)});
  forward_variables(forward_env, command);
  return command;
}

const std::vector<std::string> kHostsEnvironment = {"PATH",
                                                    "LD_LIBRARY_PATH",
                                                    "OPAL_PREFIX",
                                                    "NCCL_DEBUG",
                                                    "NCCL_SOCKET_IFNAME",
                                                    "NCCL_IB_DISABLE",
                                                    "NCCL_P2P_DISABLE",
                                                    "CUDA_VISIBLE_DEVICES",
                                                    "TANDEM_FAULT_INJECT"};

MpirunCommand mpirun_hosts_command(const std::string& hostfile, int ranks,
                                   const std::vector<std::string>& forward_env, int grace_s) {
  MpirunCommand command;
  command.argv = {mpirun_path(),
                  "--hostfile",
                  hostfile,
                  "-np",
                  std::to_string(ranks),
                  "--map-by",
                  "slot",
                  "--bind-to",
                  "none",
                  "--mca",
                  "odls_base_sigkill_timeout",
                  std::to_string(grace_s)};
  command.binding = "--map-by slot --bind-to none";
  command.why = "one rank per slot of " + hostfile;
  if (const char* iface = std::getenv("TANDEM_IFACE"); iface != nullptr && *iface != '\0') {
    command.argv.insert(command.argv.end(),
                        {"--mca", "btl_tcp_if_include", iface, "--mca", "oob_tcp_if_include", iface,
                         "-x", std::string("NCCL_SOCKET_IFNAME=") + iface});
  }
  std::vector<std::string> forward = kHostsEnvironment;
  forward.insert(forward.end(), forward_env.begin(), forward_env.end());
  forward_variables(forward, command);
  return command;
}

}  // namespace tandem::jobs
