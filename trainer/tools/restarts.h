// tandem-train --max-restarts: a job that outlives a lost rank, relaunched from its newest
// complete checkpoint, and stopped rather than looped when the same failure comes back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/tools/hosts.h"
#include "trainer/tools/job_failure.h"

namespace tandem::tools {

struct RestartOptions {
  int max_restarts = 0;           // 0: a failed job ends the launcher, as without the option
  int min_ranks = 1;              // never relaunch with fewer ranks than this
  bool keep_global_batch = true;  // with fewer ranks, more accumulation (tokens per step kept)
};

// What the launcher starts, the first time and after every failure.
struct JobPlan {
  std::vector<Host> hosts;                // a hostfile's hosts; empty: this machine only
  int ranks = 1;                          // on this machine; with hosts, their slots
  int threads = 1;                        // per rank (train.threads)
  std::vector<std::string> forward_env;   // variables passed on to every rank
  std::vector<std::string> rank_command;  // what each rank runs: this executable and its arguments
  std::string checkpoint_dir;             // where the job resumes from (checkpoint.dir)
  std::string tensorboard_dir;            // where restarts go as TensorBoard events; empty: none
  int64_t accum_steps = 1;                // train.accum_steps of the config
};

// The accumulation that keeps ranks x accumulation as close as it can to `ranks_before` x
// `accum_before` at `ranks` (at least 1; the lower one when two are as close).
int64_t accumulation_for(int64_t accum_before, int ranks_before, int ranks);

// Why a failed job is not relaunched, or "" when it is: a stop asked for, bad input, the same
// failure as the last one with no checkpoint newer than before it (`checkpoint_step` against
// `previous_checkpoint_step`), or no restart left.
std::string reason_not_to_restart(const JobFailure& failure, const JobFailure* previous,
                                  int64_t checkpoint_step, int64_t previous_checkpoint_step,
                                  int restarts_done, int max_restarts);

// The hosts that answer (host_answers, on ssh's port, kProbeTimeoutS each) among `hosts`; those
// that do not are added to `dropped`, each "name (why)".
constexpr double kProbeTimeoutS = 5;
std::vector<Host> hosts_that_answer(const std::vector<Host>& hosts,
                                    std::vector<std::string>* dropped);

// Runs the job under mpirun (run_job) and, while options allow, relaunches it after a failure:
// with hosts, on those that still answer, at their slots (not fewer than options.min_ranks), the
// accumulation raised to keep the global batch; one log line and one metrics.jsonl record per
// restart (which rank or host failed, how, the checkpoint step it resumes from, the world size and
// accumulation). Returns what the last run ended with (JobResult::exit_code; non-zero when the
// launcher gave up).
int run_with_restarts(const JobPlan& plan, const RestartOptions& options, const std::string& tool);

}  // namespace tandem::tools
