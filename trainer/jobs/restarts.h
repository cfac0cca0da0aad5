// --max-restarts (tandem-train, tandem-decode): a job that outlives a lost rank, relaunched from
// what it saved (its newest complete checkpoint, or the chunks it has done), and stopped rather
// than looped when the same failure comes back.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "trainer/jobs/hosts.h"
#include "trainer/jobs/job_failure.h"
#include "trainer/jobs/job_supervisor.h"
#include "trainer/jobs/rank_state.h"
#include "trainer/jobs/restart_record.h"

namespace tandem::jobs {

struct RestartOptions {
  int max_restarts = 0;           // 0: a failed job ends the launcher, as without the option
  int min_ranks = 1;              // never relaunch with fewer ranks than this
};

// What a run at a rank count adds to the ranks' command line, as the job's main decides it
// (training keeps its global batch with the accumulation), with the launcher's words for it and
// the settings the restart record keeps.
struct RelaunchArguments {
  std::vector<std::string> argv;  // after JobPlan::rank_command; none: the command as it is
  std::string words;              // in the restart line: ", accumulation 2"
  nlohmann::json settings = nlohmann::json::object();  // RestartRecord::settings
};

// What the launcher starts, the first time and after every failure.
struct JobPlan {
  std::vector<Host> hosts;                // a hostfile's hosts; empty: this machine only
  int ranks = 1;                          // on this machine; with hosts, their slots
  int threads = 1;                        // per rank (train.threads, tandem-decode --threads)
  // What every rank's environment gets, in mpirun's -x forms: "NAME" (this process's value) or
  // "NAME=VALUE".
  std::vector<std::string> forward_env;
  std::vector<std::string> rank_command;  // what each rank runs: this executable and its arguments
  // What a run at a rank count adds to rank_command; unset: nothing, at any count.
  std::function<RelaunchArguments(int ranks)> relaunch_arguments;
};

// A saved point of a job: a count that grows as the job saves more (the newest checkpoint's step;
// the chunks done), 0 when nothing is saved yet, and its words for the launcher's lines.
struct SavedPoint {
  int64_t count = 0;
  std::string text;  // "step 20 (runs/a/step-00000020.h5)", "37 of 120 chunks (out.es.parts)"
};

// What a job leaves on disk for a relaunch to resume from, as the launcher reads it between
// runs: training's checkpoint.dir (train/saved_checkpoints.h), a chunked job's parts
// (bulk/saved_chunks.h).
class SavedProgress {
 public:
  virtual ~SavedProgress() = default;
  // Where a run's ranks leave their state records: each run's launcher makes a folder of its own
  // whose name starts with this (jobs/state_folder.h) and removes it after the run.
  virtual std::string state_prefix() const = 0;
  // What the job has saved so far.
  virtual SavedPoint saved() const = 0;
  // What the job counts in: steps, chunks.
  virtual JobUnit unit() const = 0;
  // The launcher's words on a stop signal: what the ranks do, what a second signal leaves intact.
  virtual StopWords stop_words() const = 0;
  // The launcher's line after a stop signal ended the run: whether its work is saved.
  virtual std::string stop_report(const JobResult& result,
                                  const std::vector<RankState>& ranks) const = 0;
  // Before a relaunch: waits until the failed run has let go of what it held.
  virtual void wait_until_free() const {}
  // Keeps the restart's record beside the job's other records.
  virtual void record_restart(const RestartRecord& record) const = 0;
};

// Why a failed job is not relaunched, or "" when it is: a stop asked for, bad input, the same
// failure as the last one with nothing saved since (`saved` against `previous_saved`, counts of
// SavedPoint), or no restart left, in the job's unit.
std::string reason_not_to_restart(const JobFailure& failure, const JobFailure* previous,
                                  int64_t saved, int64_t previous_saved, int restarts_done,
                                  int max_restarts, JobUnit unit = JobUnit::kStep);

// The hosts that answer (host_answers, on ssh's port, kProbeTimeoutS each) among `hosts`; those
// that do not are added to `dropped`, each "name (why)".
constexpr double kProbeTimeoutS = 5;
std::vector<Host> hosts_that_answer(const std::vector<Host>& hosts,
                                    std::vector<std::string>* dropped);

// Runs the job under mpirun (run_job) and, while options allow, relaunches it after a failure:
// with hosts, on those that still answer, at their slots (not fewer than options.min_ranks), with
// what plan.relaunch_arguments adds at that count; one log line and one record
// (SavedProgress::record_restart) per restart (which rank or host failed, how, what it resumes
// from, the world size and the relaunch's settings). Returns what the last run ended with
// (JobResult::exit_code; non-zero when the launcher gave up).
int run_with_restarts(const JobPlan& plan, const RestartOptions& options,
                      const SavedProgress& progress, const std::string& tool);

}  // namespace tandem::jobs
