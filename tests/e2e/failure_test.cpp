// A failing rank ends the whole job, in bounded time, and says which rank failed: a rank killed
// with SIGKILL mid-training, and a rank that throws (TANDEM_FAULT_INJECT), each make mpirun exit
// non-zero within dist.timeout_s + 30 s, with a line naming the rank and no rank left running;
// the checkpoints saved before the kill stay loadable.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <csignal>
#include <iostream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kTimeoutS = 5;  // dist.timeout_s of these runs
// Issue 3: the job must end within the collective timeout plus 30 s of the failure.
constexpr double kDeadlineS = kTimeoutS + 30.0;

class FailureE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-failure");
    make_reverse_corpus(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  // The pipeline test's small model, logging every step and saving every 2 into run-<run>; many
  // steps, so that only a failure ends it within the test's time.
  static std::string config(const std::string& run) {
    const std::string path = dir_->file(run + ".yaml");
    write_file(path, "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, dropout: 0.1}\n"
                     "data: {corpus: " + dir_->file("corpus.h5") + ", max_tokens: 256, seed: 3}\n"
                     "train: {max_steps: 3000, lr: 0.003, clip_norm: 1.0, seed: 5, threads: 1}\n"
                     "checkpoint: {dir: " + run_dir(run) + ", every_steps: 2, keep_last: 100}\n"
                     "log: {every_steps: 1}\n"
                     "dist: {timeout_s: " + std::to_string(kTimeoutS) + "}\n");
    return path;
  }
  static std::string run_dir(const std::string& run) { return dir_->file("run-" + run); }
  static std::string metrics(const std::string& run) { return run_dir(run) + "/metrics.jsonl"; }

  static TempDir* dir_;
};
TempDir* FailureE2E::dir_ = nullptr;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Waits for mpirun, then for the ranks `pids` (mpirun may return while a killed rank is still
// being torn down), all by `failed_at` + kDeadlineS; returns mpirun's status and the seconds from
// the failure until the last of them ended.
std::pair<int, double> wait_for_job_end(BackgroundCommand& job, const std::vector<int>& pids,
                                        Clock::time_point failed_at) {
  const int status = job.wait();
  const auto deadline = failed_at + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(kDeadlineS));
  for (int pid : pids) {
    EXPECT_TRUE(wait_until_ended(pid, deadline)) << "rank process " << pid << " outlived the job";
  }
  return {status, seconds_since(failed_at)};
}

// (path, step) of every checkpoint step-N.h5 in `dir` (written whole or not at all), by step.
std::vector<std::pair<std::string, int64_t>> saved_checkpoints(const std::string& dir) {
  static const std::regex name(R"(step-(\d+)\.h5)");
  std::vector<std::pair<std::string, int64_t>> files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::smatch m;
    const std::string file = entry.path().filename().string();
    if (std::regex_match(file, m, name)) files.emplace_back(entry.path().string(), std::stoll(m[1]));
  }
  std::sort(files.begin(), files.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });
  return files;
}

TEST_F(FailureE2E, SigkilledRankEndsTheJobInTimeNamingTheRankAndKeepsSavedCheckpoints) {
  BackgroundCommand job("exec " + mpirun(2) + tool("tandem-train") + " --config " + config("kill"));
  ASSERT_TRUE(job.wait_until([&] {
    return reached_step(metrics("kill"), 3) && !saved_checkpoints(run_dir("kill")).empty();
  })) << job.output();
  const int victim = job.rank_pid(1);
  const int survivor = job.rank_pid(0);
  ASSERT_GT(victim, 0) << "rank 1's process not found\n" << job.output();
  ASSERT_GT(survivor, 0) << "rank 0's process not found\n" << job.output();
  const auto saved_before = saved_checkpoints(run_dir("kill"));
  const auto killed_at = Clock::now();
  ASSERT_EQ(kill(victim, SIGKILL), 0);

  const auto [status, elapsed] = wait_for_job_end(job, {victim, survivor}, killed_at);
  EXPECT_NE(status, 0) << job.output();
  EXPECT_LE(elapsed, kDeadlineS) << job.output();
  // Open MPI 4.1's report names the rank (its "PID" field there is not reliable: 0 was seen).
  const std::regex names_rank(R"(process rank 1 with PID \d+ on node \S+ exited on signal 9)");
  EXPECT_TRUE(std::regex_search(job.output(), names_rank)) << job.output();

  ASSERT_FALSE(saved_before.empty());
  for (const auto& [path, step] : saved_before) {
    try {
      EXPECT_EQ(checkpoint::load(path).step, step) << path;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "checkpoint saved before the kill does not load: " << e.what();
    }
  }
  try {
    EXPECT_GE(checkpoint::load(run_dir("kill") + "/last.h5").step, saved_before.back().second);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "last.h5 does not load after the kill: " << e.what();
  }
  std::cout << "killed rank 1 (pid " << victim << "); mpirun exited " << status
            << " and every rank had ended " << elapsed << " s later\n";
}

TEST_F(FailureE2E, RaisingRankEndsTheJobInTimeNamingTheRankAndTheError) {
  BackgroundCommand job("TANDEM_FAULT_INJECT=rank=1,step=4 exec " + mpirun(2) +
                        "-x TANDEM_FAULT_INJECT " + tool("tandem-train") + " --config " +
                        config("raise"));
  // Both ranks exist once a step is trained; the fault comes three steps later.
  ASSERT_TRUE(job.wait_until([&] { return reached_step(metrics("raise"), 1); })) << job.output();
  const std::vector<int> ranks = {job.rank_pid(0), job.rank_pid(1)};
  ASSERT_GT(ranks[0], 0) << job.output();
  ASSERT_GT(ranks[1], 0) << job.output();
  const std::string error =
      "[tandem][rank 1] error: failed in step 4: fault injected at step 4 on rank 1 "
      "(TANDEM_FAULT_INJECT)";
  ASSERT_TRUE(job.wait_for_line(error)) << job.output();
  const auto raised_at = Clock::now();

  const auto [status, elapsed] = wait_for_job_end(job, ranks, raised_at);
  EXPECT_NE(status, 0) << job.output();
  EXPECT_LE(elapsed, kDeadlineS) << job.output();
  // Open MPI's own "MPI_ABORT was invoked on rank 1" notice is not asserted: 4.1.4 garbled it
  // now and then ("ORTE_ERROR_LOG: Data unpack would read past end of buffer ... show_help.c").
  EXPECT_FALSE(reached_step(metrics("raise"), 4)) << "step 4 completed\n" << job.output();
  std::cout << "mpirun exited " << status << " and every rank had ended " << elapsed
            << " s after rank 1 raised\n";
}

}  // namespace
}  // namespace tandem::test
