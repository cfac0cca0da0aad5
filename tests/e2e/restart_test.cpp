// A job that outlives a lost rank (tandem-train --ranks 2 --max-restarts K): a rank killed with
// SIGKILL, or frozen with SIGSTOP until the watchdog ends the job, is relaunched from the newest
// checkpoint and the job finishes bitwise equal to an uninterrupted run, with one restart record in
// metrics.jsonl and no process left behind; the same failure twice in a row stops the job naming
// its step, with the checkpoint it resumed from untouched; a stop asked for is never restarted.
// Across two hosts rehearsed in network namespaces, a host whose link goes down at step 37 is
// dropped and the job finishes on the other at world size 1 with twice the accumulation. The
// faults are TANDEM_FAULT_INJECT's, in the job's first run only (restart=0), so they happen at the
// same step every time.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

class RestartE2E : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-restart");
    make_reverse_corpus(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string run_dir(const std::string& run) { return dir_->file("run-" + run); }
  static std::string metrics(const std::string& run) { return run_dir(run) + "/metrics.jsonl"; }

  // The tiny preset's model, 60 steps of 512-token batches (the preset's 2,048 would take four
  // times as long), a checkpoint every 20, every step logged, into run-<run>. A collective that
  // waits `timeout_s` ends the job: long enough for rank 0's save on a loaded machine (the other
  // ranks wait for it in the next step's first collective).
  static std::string tiny(const std::string& run, int timeout_s = 60) {
    return tool("tandem-train") + " --config " + std::string(TANDEM_SOURCE_DIR) +
           "/configs/tiny.yaml --set data.corpus=" + dir_->file("corpus.h5") +
           " --set checkpoint.dir=" + run_dir(run) +
           " --set train.max_steps=60 --set train.max_minutes=0 --set checkpoint.every_steps=20"
           " --set data.max_tokens=512"
           " --set checkpoint.keep_last=0 --set valid.every_steps=0 --set log.every_steps=1"
           " --set dist.timeout_s=" +
           std::to_string(timeout_s);
  }

  // The pipeline test's small model (dropout on unless `dropout` is false), a checkpoint every 20
  // steps, into run-<run>.
  static std::string small(const std::string& run, bool dropout = true, int timeout_s = 20) {
    const std::string path = dir_->file(run + ".yaml");
    write_file(path,
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, "
               "dropout: " +
                   std::string(dropout ? "0.1" : "0") +
                   "}\n"
                   "data: {corpus: " +
                   dir_->file("corpus.h5") +
                   ", max_tokens: 256, seed: 3}\n"
                   "train: {max_steps: 60, lr: 0.003, clip_norm: 1.0, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   run_dir(run) +
                   ", every_steps: 20, keep_last: 0}\n"
                   "log: {every_steps: 1}\n"
                   "dist: {timeout_s: " +
                   std::to_string(timeout_s) + "}\n");
    return tool("tandem-train") + " --config " + path;
  }

  static std::vector<nlohmann::json> records(const std::string& run, bool restarts) {
    std::ifstream in(run_dir(run) + "/metrics.jsonl");
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) {
      auto record = nlohmann::json::parse(line);
      if (record.contains("event") == restarts) out.push_back(std::move(record));
    }
    return out;
  }

  // The uninterrupted 2-rank run that the restarted ones must equal (trained once per suite).
  static const std::string& reference() {
    static const std::string run = [] {
      const auto r = run_command(tiny("reference") + " --ranks 2");
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return run_dir("reference");
    }();
    return run;
  }

  static TempDir* dir_;
};
TempDir* RestartE2E::dir_ = nullptr;

// Whether the relaunched job has trained a step: a training record follows the last restart
// record in metrics.jsonl (a resumed run drops the records past its checkpoint, then appends).
bool trained_after_restart(const std::string& metrics) {
  bool restarted = false, trained = false;
  for (const auto& record : metrics_records(metrics)) {
    const bool restart = record.contains("event");
    restarted = restarted || restart;
    trained = restarted && !restart;
  }
  return trained;
}

bool same_tensors(const checkpoint::NamedTensors& a, const checkpoint::NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !torch::equal(a[i].second, b[i].second)) return false;
  }
  return true;
}

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Runs the tiny preset (with `flags`) with `fault` in its first run, checking that it was
// restarted once from step 20, finished at step 60 equal bit for bit to the reference, and left no
// process running.
void expect_restarted_equal_to_reference(const std::string& run, const std::string& fault,
                                         int timeout_s, const std::string& flags = "") {
  const std::string expected = RestartE2E::reference();
  BackgroundCommand job("TANDEM_FAULT_INJECT=" + fault + " exec " +
                        RestartE2E::tiny(run, timeout_s) + flags + " --ranks 2 --max-restarts 1");
  const std::string metrics = RestartE2E::metrics(run);
  ASSERT_TRUE(job.wait_until([&] { return reached_step(metrics, 1); })) << job.output();
  std::vector<int> pids = {job.rank_pid(0), job.rank_pid(1)};
  ASSERT_TRUE(job.wait_for_line("restart 1 of 1: rank")) << job.output();
  EXPECT_NE(job.output().find("resuming from step 20 (" + RestartE2E::run_dir(run) +
                              "/step-00000020.h5) at 2 rank(s)"),
            std::string::npos)
      << job.output();
  ASSERT_TRUE(job.wait_until([&] { return trained_after_restart(metrics); })) << job.output();
  pids.push_back(job.rank_pid(0));
  pids.push_back(job.rank_pid(1));
  const int status = job.wait();
  ASSERT_EQ(status, 0) << job.output();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int pid : pids) {
    EXPECT_TRUE(pid <= 0 || wait_until_ended(pid, deadline))
        << "rank " << pid << " outlived the job";
  }

  const auto restarts = RestartE2E::records(run, true);
  ASSERT_EQ(restarts.size(), 1u) << job.output();
  EXPECT_EQ(restarts[0]["event"], "restart");
  EXPECT_EQ(restarts[0]["step"], 20);
  EXPECT_EQ(restarts[0]["world_size"], 2);
  EXPECT_EQ(restarts[0]["accum_steps"], 1);
  // One history: the first run's steps 21-36 gave way to the second run's.
  const auto got = RestartE2E::records(run, false);
  const auto want = RestartE2E::records("reference", false);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i]["step"], want[i]["step"]);
    EXPECT_EQ(got[i]["loss"], want[i]["loss"]) << "step " << got[i]["step"];
  }

  const auto p = checkpoint::load(expected + "/step-00000060.h5");
  const auto q = checkpoint::load(RestartE2E::run_dir(run) + "/step-00000060.h5");
  EXPECT_TRUE(same_tensors(p.model, q.model));
  ASSERT_EQ(p.optimizer.size(), q.optimizer.size());
  for (const auto& [group, tensors] : p.optimizer) {
    EXPECT_TRUE(same_tensors(tensors, q.optimizer.at(group))) << "/optimizer/" << group;
  }
  EXPECT_EQ(p.optimizer_step, q.optimizer_step);
}

TEST_F(RestartE2E, RankKilledAtStep37IsRestartedFromStep20AndEqualsTheUninterruptedRun) {
  expect_restarted_equal_to_reference("sigkill", "rank=1,step=37,kind=sigkill,restart=0", 60);
}

// With the optimizer state sharded (dist.shard_optimizer changes nothing but memory): the same
// restart ends equal to the unsharded reference.
TEST_F(RestartE2E, ShardedRankKilledAtStep37IsRestartedFromStep20AndEqualsTheUnshardedRun) {
  expect_restarted_equal_to_reference("sharded-sigkill", "rank=1,step=37,kind=sigkill,restart=0",
                                      60, " --set dist.shard_optimizer=true");
}

TEST_F(RestartE2E,
       RankFrozenAtStep37IsEndedByTheWatchdogThenRestartedAndEqualsTheUninterruptedRun) {
  // The watchdog waits 20 s, far longer than rank 0's save: a whole 1-step run of the tiny preset
  // with a 123 MB checkpoint (the Bible's 8,000-token vocabulary; this corpus has 64) took 5 s on
  // a 2-core machine under load.
  expect_restarted_equal_to_reference("sigstop", "rank=1,step=37,kind=sigstop,restart=0", 20);
}

TEST_F(RestartE2E, TheSameFailureTwiceStopsTheJobNamingItsStepWithTheCheckpointUntouched) {
  BackgroundCommand job("TANDEM_FAULT_INJECT=rank=1,step=25 exec " + small("crash") +
                        " --ranks 2 --max-restarts 3");
  ASSERT_TRUE(job.wait_for_line("restart 1 of 3: rank 1")) << job.output();
  // The run after the restart resumes from step 20 and fails before it could save again.
  const std::string step20 = run_dir("crash") + "/step-00000020.h5";
  const std::string before = file_bytes(step20);
  const int status = job.wait();
  EXPECT_NE(status, 0) << job.output();
  EXPECT_NE(job.output().find("not restarting: the same failure came back after a restart from "
                              "step 20, in step 25"),
            std::string::npos)
      << job.output();
  EXPECT_EQ(job.output().find("restart 2 of 3"), std::string::npos) << job.output();
  EXPECT_EQ(records("crash", true).size(), 1u);
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(file_bytes(step20), before) << "step-00000020.h5 changed";
  EXPECT_EQ(checkpoint::find_latest(run_dir("crash")), step20);
  EXPECT_EQ(checkpoint::load(step20).step, 20);
}

TEST_F(RestartE2E, AStopAskedForIsNeverRestarted) {
  // SIGTERM to the launcher: the ranks save and the launcher returns 143, once.
  {
    BackgroundCommand job("exec " + small("sigterm") + " --ranks 2 --max-restarts 2");
    ASSERT_TRUE(job.wait_until([] { return reached_step(metrics("sigterm"), 3); }))
        << job.output();
    job.signal(SIGTERM);
    EXPECT_EQ(job.wait(), 128 + SIGTERM) << job.output();
    EXPECT_EQ(job.output().find("restart 1"), std::string::npos) << job.output();
    EXPECT_TRUE(records("sigterm", true).empty());
  }
  // SIGUSR1 to every rank (as SLURM sends before a time limit): each saves and exits 138.
  {
    BackgroundCommand job("exec " + small("sigusr1") + " --ranks 2 --max-restarts 2");
    ASSERT_TRUE(job.wait_until([] { return reached_step(metrics("sigusr1"), 3); }))
        << job.output();
    const int pids[] = {job.rank_pid(0), job.rank_pid(1)};
    for (int pid : pids) {
      ASSERT_GT(pid, 0) << job.output();
      kill(pid, SIGUSR1);
    }
    EXPECT_EQ(job.wait(), 128 + SIGUSR1) << job.output();
    EXPECT_NE(job.output().find("not restarting: the ranks stopped on request"), std::string::npos)
        << job.output();
    EXPECT_TRUE(records("sigusr1", true).empty());
  }
}

TEST_F(RestartE2E, AHostWhoseLinkGoesDownIsDroppedAndTheJobFinishesOnTheOther) {
  const std::string rehearsal = std::string(TANDEM_LAUNCH_DIR) + "/netns-rehearsal.sh";
  const auto check = run_command(rehearsal + " --check");
  if (check.exit_code == 77) GTEST_SKIP() << check.output;
  ASSERT_EQ(check.exit_code, 0) << check.output;
  const auto straight =
      run_command(small("netns-straight", false) + " --ranks 2");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;

  // Rank 1 (on nodeB) stops itself at the start of step 37; once step 36 is logged, nodeB's link
  // goes down, well within the 20 s that rank 0 waits for it in step 37 before its watchdog ends
  // the job.
  BackgroundCommand job("TANDEM_FAULT_INJECT=rank=1,step=37,kind=sigstop,restart=0 exec " +
                        rehearsal + " --launcher -- " + small("netns", false, 20) +
                        " --hostfile {hostfile} --max-restarts 1");
  ASSERT_TRUE(job.wait_for_line("nodeB = namespace")) << job.output();
  std::smatch ns;
  const std::string output = job.output();
  ASSERT_TRUE(std::regex_search(output, ns, std::regex(R"(nodeB = namespace (\w+))")));
  ASSERT_TRUE(job.wait_until([] { return reached_step(metrics("netns"), 36); })) << job.output();
  const std::string link = ns[1].str();
  const auto down = run_command("ip -n " + link + " link set " + link + " down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  ASSERT_EQ(job.wait(), 0) << job.output();
  EXPECT_NE(job.output().find("at 1 rank(s) without nodeB"), std::string::npos) << job.output();

  const auto restarts = records("netns", true);
  ASSERT_EQ(restarts.size(), 1u) << job.output();
  EXPECT_EQ(restarts[0]["step"], 20);
  EXPECT_EQ(restarts[0]["world_size"], 1);
  EXPECT_EQ(restarts[0]["accum_steps"], 2);
  ASSERT_EQ(restarts[0]["dropped_hosts"].size(), 1u);
  EXPECT_EQ(restarts[0]["dropped_hosts"][0].get<std::string>().rfind("nodeB (", 0), 0u);
  const auto got = records("netns", false);
  const auto want = records("netns-straight", false);
  ASSERT_EQ(got.size(), 60u);
  ASSERT_EQ(want.size(), 60u);
  for (size_t i = 39; i < 60; ++i) {  // steps 40-60
    const double a = want[i]["loss"], b = got[i]["loss"];
    EXPECT_NEAR(b, a, 0.01 * a) << "step " << i + 1;
  }
  EXPECT_EQ(checkpoint::load(run_dir("netns") + "/last.h5").step, 60);
}

TEST_F(RestartE2E, BadRestartOptionsAreUsageErrors) {
  const std::string base = small("usage");
  for (const std::string& args :
       {std::string("--ranks 2 --max-restarts -1"), std::string("--ranks 2 --max-restarts two"),
        std::string("--ranks 2 --max-restarts 1.5"),
        std::string("--ranks 2 --max-restarts 99999999999"),
        std::string("--ranks 2 --max-restarts 1 --min-ranks 3"), std::string("--max-restarts 1"),
        std::string("--hostfile /nonexistent/hosts --max-restarts 1")}) {
    const auto r = run_command(base + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
    const std::string named = args.find("--min-ranks") != std::string::npos  ? "--min-ranks"
                              : args.find("--hostfile") != std::string::npos ? "/nonexistent/hosts"
                                                                             : "--max-restarts";
    EXPECT_NE(r.output.find(named), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(metrics("usage"))) << r.output;  // nothing started
  }
}

}  // namespace
}  // namespace tandem::test
