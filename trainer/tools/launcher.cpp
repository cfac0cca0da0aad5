#include "trainer/tools/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "trainer/tools/process.h"

namespace tandem::tools {
namespace {

constexpr int kStopSignals[] = {SIGTERM, SIGINT, SIGHUP};

// Signals reach run_job's loop through a pipe: a handler may run on any thread (OpenBLAS starts
// its own), and writing a byte is all it does.
int g_signal_pipe[2] = {-1, -1};

void forward_to_pipe(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  if (write(g_signal_pipe[1], &byte, 1) < 0) {
    // A full pipe already holds enough signals to act on.
  }
  errno = saved;
}

void set_handlers(void (*handler)(int)) {
  struct sigaction action {};
  action.sa_handler = handler;
  sigemptyset(&action.sa_mask);
  for (int sig : kStopSignals) sigaction(sig, &action, nullptr);
  sigaction(SIGCHLD, &action, nullptr);
}

// The child: its own process group, no terminal input, default signal dispositions, then mpirun.
[[noreturn]] void exec_job(const std::vector<std::string>& argv) {
  setpgid(0, 0);
  const int null = open("/dev/null", O_RDONLY);
  if (null >= 0) dup2(null, STDIN_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  execvp(args[0], args.data());
  std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
  _exit(127);
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
  }
  return "a signal";
}

// What a stop signal does, by how many came so far: ask the ranks to save (SIGUSR2, which mpirun
// forwards to every rank at once; they then exit 0, so mpirun ends normally), then to stop at
// once (their handlers exit on a second signal), then kill mpirun's process group outright.
void pass_on_stop(int sig, int count, pid_t job, const std::string& tool) {
  const char* name = signal_name(sig);
  if (count == 1) {
    std::fprintf(stderr,
                 "%s: %s: every rank finishes its step and saves a checkpoint; a second signal "
                 "stops at once\n",
                 tool.c_str(), name);
    kill(job, SIGUSR2);
  } else if (count == 2) {
    std::fprintf(stderr, "%s: %s again: stopping at once (saved checkpoints stay intact)\n",
                 tool.c_str(), name);
    kill(job, SIGUSR2);
  } else {
    kill(-job, SIGKILL);
    kill(job, SIGKILL);
  }
  std::fflush(stderr);
}

int exit_status(int status) {
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace

int stop_grace_s() {
  const char* text = std::getenv("TANDEM_STOP_GRACE");
  if (text == nullptr || *text == '\0') return kStopGraceS;
  char* end = nullptr;
  const long seconds = std::strtol(text, &end, 10);
  if (*end != '\0' || seconds < 1 || seconds > 86400) {
    throw std::invalid_argument(std::string("TANDEM_STOP_GRACE='") + text +
                                "': expected whole seconds from 1 to 86400");
  }
  return static_cast<int>(seconds);
}

MpirunCommand mpirun_command(int ranks, int threads, const std::vector<std::string>& forward_env,
                             int grace_s) {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) {
    throw std::runtime_error(
        "mpirun not found on PATH (needed for more than one rank; install "
        "openmpi-bin)");
  }
  MpirunCommand command;
  command.argv = {mpirun, "--oversubscribe", "-np", std::to_string(ranks)};
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
  std::vector<std::string> forward = forward_env;
  if (geteuid() == 0) {
    setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
    setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    forward.insert(forward.end(), {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"});
  }
  for (const auto& name : forward) {
    if (std::getenv(name.c_str()) != nullptr) command.argv.insert(command.argv.end(), {"-x", name});
  }
  return command;
}

bool started_as_rank() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_PROCID"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

int auto_ranks(int gpus, int threads) {
  if (gpus > 0) return gpus;
  return std::max(1, usable_cores() / std::max(1, threads));
}

int run_job(const std::vector<std::string>& argv, const std::string& tool) {
  if (pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) {
    throw std::runtime_error(std::string("pipe failed: ") + std::strerror(errno));
  }
  set_handlers(forward_to_pipe);
  std::fflush(nullptr);  // or the child would write our buffered output a second time
  const pid_t job = fork();
  if (job < 0) throw std::runtime_error(std::string("fork failed: ") + std::strerror(errno));
  if (job == 0) exec_job(argv);
  setpgid(job, job);  // also here, so no signal is sent before the child has its group
  int stops = 0, first_stop = 0, status = 0;
  while (waitpid(job, &status, WNOHANG) == 0) {
    pollfd wake{g_signal_pipe[0], POLLIN, 0};
    if (poll(&wake, 1, -1) < 0 && errno != EINTR) break;
    unsigned char sig = 0;
    while (read(g_signal_pipe[0], &sig, 1) == 1) {
      if (sig == SIGCHLD) continue;
      if (++stops == 1) first_stop = sig;
      pass_on_stop(sig, stops, job, tool);
    }
  }
  set_handlers(SIG_DFL);
  close(g_signal_pipe[0]);
  close(g_signal_pipe[1]);
  if (first_stop == 0) return exit_status(status);
  if (stops == 1 && exit_status(status) == 0) {
    std::fprintf(stderr, "%s: stopped by %s; the last step is saved\n", tool.c_str(),
                 signal_name(first_stop));
  }
  return 128 + first_stop;
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

}  // namespace tandem::tools
