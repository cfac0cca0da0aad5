// The launcher's flags that tandem-train and tandem-decode share (--ranks, --hostfile,
// --max-restarts, --min-ranks), what they ask for, checked, and the launch itself with its
// opening line: the tool's own command line run as every rank of an mpirun job, supervised.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "trainer/jobs/restarts.h"

namespace tandem::jobs {

struct LaunchFlags {
  std::string ranks;  // "", "auto" or a count
  std::string hostfile;
  std::string max_restarts;
  std::string min_ranks;
  // Whether a launcher is asked for: --ranks or --hostfile.
  bool launcher() const { return !ranks.empty() || !hostfile.empty(); }
};

// `ranks_auto` says what --ranks auto is; `resumes_from` what a relaunch resumes from ("its newest
// checkpoint").
void add_launch_flags(CLI::App& app, LaunchFlags& flags, const std::string& ranks_auto,
                      const std::string& resumes_from);

// The flags that go together: the restart options need a launcher, and a launcher has either
// --ranks or --hostfile. CLI::ValidationError (a usage error) otherwise.
void check_launch_flags(const LaunchFlags& flags);

// A whole-number option: its value, or `fallback` when it was not given; std::invalid_argument
// naming the option when the value is not a whole number >= `least`.
int count_option(const std::string& name, const std::string& text, int least, int fallback);

// --ranks as a count: `auto_ranks` for "auto"; std::invalid_argument for what is not a count >= 1.
int requested_ranks(const LaunchFlags& flags, int auto_ranks);

// --max-restarts and --min-ranks, checked against the job's `ranks`.
RestartOptions restart_options(const LaunchFlags& flags, int ranks);

// The launch: one line saying how the ranks run (`plan.hosts` or N on this machine, pinned or
// not), then run_with_restarts; returns its exit code.
int launch_job(const JobPlan& plan, const RestartOptions& restarts, const SavedProgress& progress,
               const std::string& tool);

}  // namespace tandem::jobs
