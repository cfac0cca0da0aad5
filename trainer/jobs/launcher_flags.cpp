#include "trainer/jobs/launcher_flags.h"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "trainer/common/whole_number.h"
#include "trainer/jobs/mpirun_command.h"

namespace tandem::jobs {

void add_launch_flags(CLI::App& app, LaunchFlags& flags, const std::string& ranks_auto,
                      const std::string& resumes_from) {
  app.add_option("--ranks", flags.ranks,
                 "start N ranks on this machine under mpirun, pinned and with safe stops; auto: " +
                     ranks_auto);
  app.add_option("--hostfile", flags.hostfile,
                 "start one rank per slot of this Open MPI hostfile (\"node01 slots=8\" lines) "
                 "under mpirun, with safe stops");
  app.add_option("--max-restarts", flags.max_restarts,
                 "with --ranks or --hostfile: relaunch a job whose rank died from " + resumes_from +
                     ", up to K times (default 0)");
  app.add_option("--min-ranks", flags.min_ranks,
                 "with --max-restarts: never relaunch with fewer ranks than this (default 1)");
}

void check_launch_flags(const LaunchFlags& flags) {
  if ((!flags.max_restarts.empty() || !flags.min_ranks.empty()) && !flags.launcher()) {
    throw CLI::ValidationError(
        "--max-restarts and --min-ranks need --ranks N or --hostfile FILE: the launcher "
        "restarts the job");
  }
  if (!flags.ranks.empty() && !flags.hostfile.empty()) {
    throw CLI::ValidationError("--ranks and --hostfile: give one (a hostfile's slots are ranks)");
  }
}

int count_option(const std::string& name, const std::string& text, int least, int fallback) {
  if (text.empty()) return fallback;
  const auto value = parse_whole_number(text);
  if (!value || *value < least || *value > 1000000) {
    throw std::invalid_argument(name + " '" + text +
                                "': expected a whole number >= " + std::to_string(least));
  }
  return static_cast<int>(*value);
}

int requested_ranks(const LaunchFlags& flags, int auto_ranks) {
  if (flags.ranks == "auto") return auto_ranks;
  const auto ranks = parse_whole_number(flags.ranks);
  if (!ranks || *ranks < 1 || *ranks > 1000000) {
    throw std::invalid_argument("--ranks '" + flags.ranks + "': expected a count >= 1 or auto");
  }
  return static_cast<int>(*ranks);
}

RestartOptions restart_options(const LaunchFlags& flags, int ranks) {
  RestartOptions options;
  options.max_restarts = count_option("--max-restarts", flags.max_restarts, 0, 0);
  options.min_ranks = count_option("--min-ranks", flags.min_ranks, 1, 1);
  if (options.min_ranks > ranks) {
    throw std::invalid_argument("--min-ranks " + flags.min_ranks + " is more than the job's " +
                                std::to_string(ranks) + " rank(s)");
  }
  return options;
}

int launch_job(const JobPlan& plan, const RestartOptions& restarts, const SavedProgress& progress,
               const std::string& tool) {
  const std::string restart_note =
      restarts.max_restarts > 0
          ? "; up to " + std::to_string(restarts.max_restarts) + " restart(s) after a failure"
          : "";
  if (plan.hosts.empty()) {
    const auto command = mpirun_command(plan.ranks, plan.threads, plan.forward_env);
    std::fprintf(stderr, "%s: %d ranks under mpirun, %s (%s)%s\n", tool.c_str(), plan.ranks,
                 command.binding.c_str(), command.why.c_str(), restart_note.c_str());
  } else {
    std::fprintf(stderr, "%s: %d ranks on %zu host(s) under mpirun, one per slot%s\n", tool.c_str(),
                 total_slots(plan.hosts), plan.hosts.size(), restart_note.c_str());
  }
  return run_with_restarts(plan, restarts, progress, tool);
}

}  // namespace tandem::jobs
