// launch/slurm/tandem.sbatch under a real SLURM (Debian's slurm-wlm and munge, started by
// launch/slurm/local-cluster.sh on this machine): the script as shipped, its #SBATCH lines
// overridden on sbatch's command line for two CPU tasks. On one node: a job trains on every task
// and completes bitwise equal to tandem-train --ranks 2; scancel saves the step the job stopped
// at; the time limit's warning (--signal=B:USR1) saves, requeues and resumes bit for bit; a file
// translated by the script (decode) and cancelled, then submitted again, or requeued on its time
// limit's warning, ends in the bytes of tandem-decode --ranks 2 outside SLURM. On two
// nodes (network namespaces joined by a link, one task each): a job trains across both; when
// nodeB's link goes down mid-run, SLURM sets the node DOWN, the job (--no-kill) goes on, and the
// launcher relaunches it on nodeA from its newest checkpoint and finishes. Skipped, with the
// reason, where SLURM or the namespaces cannot run (not root, the packages missing). A cluster
// that cannot start (this machine's name does not resolve) fails at once with the reason, and a
// cluster whose owner dies (a test CTest killed) is stopped with everything it started. The
// script's refusals of bad allocations need no cluster and run everywhere.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

const std::string kCluster = std::string(TANDEM_LAUNCH_DIR) + "/slurm/local-cluster.sh";
const std::string kScript = std::string(TANDEM_LAUNCH_DIR) + "/slurm/tandem.sbatch";

// The processes of the cluster in `dir`: those whose environment names its slurm.conf (its
// daemons, and what they started).
std::vector<int> cluster_processes(const std::string& dir) {
  const std::string marker = "SLURM_CONF=" + dir + "/slurm.conf";
  std::vector<int> pids;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ(entry.path() / "environ", std::ios::binary);
    for (std::string variable; std::getline(environ, variable, '\0');) {
      if (variable == marker) pids.push_back(std::stoi(name));
    }
  }
  return pids;
}

// A cluster of `Nodes` nodes (1: this machine; 2: nodeA and nodeB) for the suite, two tasks in
// all: two on the one node, or one on each.
template <int Nodes>
class SlurmCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const auto check = run_command(kCluster + " --check");
    if (check.exit_code != 0) {
      skip_ = check.output;
      return;
    }
    dir_ = new TempDir("slurm");
    // Stopped with this process, however it ends (CTest's timeout kills it).
    const auto started =
        run_command("TANDEM_SLURM_OWNER=" + std::to_string(getpid()) + " " + kCluster +
                    (Nodes == 1 ? " start " : " start2 ") + dir_->file("cluster"));
    if (started.exit_code == 77) {
      skip_ = started.output;
      return;
    }
    ASSERT_EQ(started.exit_code, 0) << started.output;
    corpus_ = make_reverse_corpus(dir_->path());
    run_command("mkdir -p " + dir_->file("runs"));
  }
  static void TearDownTestSuite() {
    if (dir_ == nullptr) return;
    run_command(slurm("scancel --user=root") + "; " + kCluster + " stop " + dir_->file("cluster"));
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << skip_;
    ASSERT_NE(dir_, nullptr);
  }

  // `command` (sbatch, scontrol, ...) run where the cluster's controller is reached.
  static std::string slurm(const std::string& command) {
    return kCluster + " run " + dir_->file("cluster") + " " + command;
  }

  // A small model (steps of milliseconds), checkpoints every 10 steps, every step logged; a
  // collective that waits 30 s ends the job (a peer gone).
  static std::string config(const std::string& run, int64_t max_steps) {
    const std::string path = dir_->file(run + ".yaml");
    write_file(path,
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, "
               "dropout: 0.1}\n"
               "data: {corpus: " +
                   corpus_ +
                   ", max_tokens: 256, seed: 3}\n"
                   "train: {max_steps: " +
                   std::to_string(max_steps) +
                   ", max_minutes: 0, lr: 0.003, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   dir_->file(run) +
                   ", every_steps: 10, keep_last: 0}\n"
                   "valid: {every_steps: 0}\n"
                   "log: {every_steps: 1}\n"
                   "dist: {timeout_s: 30}\n");
    return path;
  }

  // sbatch --wait for the shipped script with two CPU tasks: returns when the job has ended (with
  // its exit code), or after 5 minutes (a job SLURM never starts fails the test then); the job's
  // output goes to runs/<run>.log. `env`: variables for the job ("NAME=value ...").
  static std::string sbatch(const std::string& run, const std::string& config_path,
                            const std::string& options = "", const std::string& env = "") {
    const std::string tasks =
        Nodes == 1 ? " --nodes=1 --ntasks-per-node=2" : " --nodes=2 --ntasks-per-node=1";
    return "env " + env + " " +
           slurm("timeout 300 sbatch --wait --chdir=" + dir_->path() + " --output=" + log(run) +
                 " --export=ALL,TANDEM_BIN=" + tool("tandem-train") + tasks +
                 " --cpus-per-task=1 --gpus-per-node=0 " + options + " " + kScript + " " +
                 config_path);
  }
  static std::string log(const std::string& run) { return dir_->file("runs/" + run + ".log"); }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string metrics(const std::string& run) { return dir_->file(run) + "/metrics.jsonl"; }
  // The job's output as it grows, for wait_for_line; it ends after `seconds`, so that a line
  // that never comes fails the test instead of holding it.
  static std::string follow(const std::string& run, int seconds) {
    return "exec timeout " + std::to_string(seconds) + " tail -n +1 -F " + log(run) +
           " 2>/dev/null";
  }

  // A job's or a node's state as scontrol shows it ("COMPLETED", "DOWN", ...).
  static std::string state(const std::string& what, const std::string& key) {
    const auto shown = run_command(slurm("scontrol show " + what));
    std::smatch m;
    return std::regex_search(shown.output, m, std::regex(key + "=(\\w+)")) ? m[1].str() : "?";
  }
  static std::string job_state(const std::string& id) { return state("job " + id, "JobState"); }
  static std::string job_id(const std::string& sbatch_output) {
    std::smatch m;
    return std::regex_search(sbatch_output, m, std::regex("Submitted batch job (\\d+)"))
               ? m[1].str()
               : "";
  }

  // The same config trained by tandem-train --ranks 2 outside SLURM, to `steps`.
  static checkpoint::CheckpointData reference(const std::string& run, int64_t steps) {
    const auto r = run_command(tool("tandem-train") + " --ranks 2 --config " + config(run, steps));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return checkpoint::load(dir_->file(run) + "/" + checkpoint::step_file_name(steps));
  }

  static void expect_same(const checkpoint::CheckpointData& a,
                          const checkpoint::CheckpointData& b) {
    ASSERT_EQ(a.step, b.step);
    ASSERT_EQ(a.model.size(), b.model.size());
    for (size_t i = 0; i < a.model.size(); ++i) {
      EXPECT_TRUE(torch::equal(a.model[i].second, b.model[i].second)) << a.model[i].first;
    }
    for (const auto& [group, tensors] : b.optimizer) {
      for (size_t i = 0; i < tensors.size(); ++i) {
        EXPECT_TRUE(torch::equal(a.optimizer.at(group)[i].second, tensors[i].second))
            << group << "/" << tensors[i].first;
      }
    }
  }

  // A model for the decoding jobs (40 steps, trained once, outside SLURM), and an input of the test
  // split's sources 7,500 times over (300,000 lines; about 8 s of decoding at 2 ranks here).
  static std::string decode_args(const std::string& output) {
    static const std::string model = [] {
      const auto r = run_command(tool("tandem-train") + " --ranks 2 --config " +
                                 config("decoder", 40));
      EXPECT_EQ(r.exit_code, 0) << r.output;
      std::string once = read_text(file("test.src")), input;
      for (int copy = 0; copy < 7500; ++copy) input += once;
      write_file(file("mono.txt"), input);
      return file("decoder/last.h5");
    }();
    return "--checkpoint " + model + " --input " + file("mono.txt") + " --output " +
           file(output) + " --chunk-lines 5000 --threads 1";
  }

  // The same translation by tandem-decode --ranks 2 outside SLURM (made once).
  static const std::string& decode_reference() {
    static const std::string bytes = [] {
      const auto r = run_command(tool("tandem-decode") + " " + decode_args("reference.txt") +
                                 " --ranks 2");
      EXPECT_EQ(r.exit_code, 0) << r.output;
      return read_text(file("reference.txt"));
    }();
    return bytes;
  }

  static int decode_parts(const std::string& output) {
    const auto listed = run_command("ls " + file(output) + ".parts 2>/dev/null | grep -c part$");
    return listed.exit_code == 0 ? std::stoi(listed.output) : 0;
  }

  static inline TempDir* dir_ = nullptr;
  static inline std::string corpus_;
  static inline std::string skip_;
};
using Slurm = SlurmCluster<1>;
using SlurmTwoNodes = SlurmCluster<2>;

TEST_F(Slurm, AJobTrainsOnEveryTaskAndCompletesAsTandemTrainRanks2) {
  const auto job = run_command(sbatch("complete", config("complete", 30)));
  ASSERT_EQ(job.exit_code, 0) << job.output << read_text(log("complete"));
  const std::string text = read_text(log("complete"));
  EXPECT_NE(text.find("tandem-train: 2 ranks on 1 host(s) under mpirun"), std::string::npos)
      << text;
  EXPECT_EQ(checkpoint::load_description(dir_->file("complete/last.h5")).world_size, 2);
  EXPECT_EQ(job_state(job_id(job.output)), "COMPLETED");
  expect_same(checkpoint::load(dir_->file("complete/last.h5")), reference("complete-ref", 30));
}

// One scancel: SIGTERM from SLURM to the script, the launcher, mpirun and the ranks, and the
// script's own SIGTERM to the launcher. One save, of the step the job was in.
TEST_F(Slurm, ScancelSavesTheStepTheJobStoppedAt) {
  BackgroundCommand job("exec " + sbatch("cancel", config("cancel", 100000)));
  ASSERT_TRUE(job.wait_for_line("Submitted batch job")) << job.output();
  const std::string id = job_id(job.output());
  BackgroundCommand output(follow("cancel", 300));
  ASSERT_TRUE(output.wait_until([] { return reached_step(metrics("cancel"), 25); }))
      << output.output();
  const auto cancelled = run_command(slurm("scancel " + id));
  ASSERT_EQ(cancelled.exit_code, 0) << cancelled.output;
  job.wait();  // SLURM has marked the job cancelled; its processes may still be saving
  ASSERT_TRUE(output.wait_for_line("tandem-train: stopped by")) << output.output();
  const std::string text = output.output();
  std::smatch saved;
  ASSERT_TRUE(std::regex_search(
      text, saved, std::regex(R"(stopped by SIGTERM; the last step is saved \(step (\d+))")))
      << text;
  const int64_t step = std::stoll(saved[1].str());
  EXPECT_GE(step, 25);
  EXPECT_NE(text.find("JOB " + id + " ON"), std::string::npos) << text;  // slurmstepd's
  EXPECT_NE(text.find("CANCELLED AT"), std::string::npos) << text;       // "*** JOB ... ***"
  EXPECT_EQ(checkpoint::find_latest(dir_->file("cancel")),
            dir_->file("cancel") + "/" + checkpoint::step_file_name(step));
  expect_same(checkpoint::load(checkpoint::find_latest(dir_->file("cancel"))),
              reference("cancel-ref", step));
}

// --time=1 with the warning 50 s before the limit: the script asks the launcher to stop, the
// ranks save, the script requeues the job, and the requeued run resumes from that step. Once the
// first requeue shows, the config's max_steps is brought within the second run's reach, and the
// job completes equal, bit for bit, to one uninterrupted run. SLURM sends the warning when its
// periodic check (every 30 s) finds the job within warning + 30 s of its limit, and again to a
// requeued job: with --time=1 that is at the first check of each run, which could stop the
// second run too; the job is given a limit of 10 minutes once the first warning has come.
TEST_F(Slurm, TheTimeLimitsWarningSavesRequeuesAndTheRunResumesBitwise) {
  const std::string path = config("limit", 100000);
  BackgroundCommand job("exec " + sbatch("limit", path, "--time=1 --signal=B:USR1@50"));
  ASSERT_TRUE(job.wait_for_line("Submitted batch job")) << job.output();
  const std::string id = job_id(job.output());
  BackgroundCommand output(follow("limit", 300));
  ASSERT_TRUE(output.wait_for_line("requeueing job " + id)) << output.output();
  const auto limit = run_command(slurm("scontrol update JobId=" + id + " TimeLimit=10"));
  ASSERT_EQ(limit.exit_code, 0) << limit.output;
  std::smatch saved;
  const std::string first = output.output();
  ASSERT_TRUE(std::regex_search(first, saved, std::regex(R"(the last step is saved \(step (\d+))")))
      << first;
  const int64_t stopped = std::stoll(saved[1].str());
  const int64_t end = stopped + 20;
  config("limit", end);  // read again by the requeued run
  EXPECT_EQ(job.wait(), 0) << job.output();
  // One history: the requeued run resumed at the step saved, every step logged once.
  const auto logged = training_records(metrics("limit"));
  ASSERT_EQ(logged.size(), static_cast<size_t>(end)) << read_text(log("limit"));
  for (int64_t k = 0; k < end; ++k) EXPECT_EQ(logged[k]["step"], k + 1);
  EXPECT_EQ(job_state(id), "COMPLETED");
  expect_same(checkpoint::load(dir_->file("limit/last.h5")), reference("limit-ref", end));
}

// scancel: the ranks finish the chunks in hand and the job ends; the same sbatch again resumes.
TEST_F(Slurm, ADecodeJobCancelledAndSubmittedAgainEndsInTheBytesOfTandemDecode) {
  const std::string& expected = decode_reference();
  BackgroundCommand job("exec " + sbatch("decode-cancel", "decode " + decode_args("cancel.txt")));
  ASSERT_TRUE(job.wait_for_line("Submitted batch job")) << job.output();
  const std::string id = job_id(job.output());
  BackgroundCommand output(follow("decode-cancel", 300));
  ASSERT_TRUE(output.wait_until([] { return decode_parts("cancel.txt") >= 3; }))
      << output.output();
  ASSERT_EQ(run_command(slurm("scancel " + id)).exit_code, 0);
  job.wait();
  ASSERT_TRUE(output.wait_for_line("tandem-decode: stopped by")) << output.output();
  EXPECT_NE(output.output().find("the same command resumes at the first unfinished chunk"),
            std::string::npos)
      << output.output();
  const int done = decode_parts("cancel.txt");
  EXPECT_LT(done, 60);
  const auto again = run_command(sbatch("decode-again", "decode " + decode_args("cancel.txt")));
  ASSERT_EQ(again.exit_code, 0) << again.output << read_text(log("decode-again"));
  const std::string text = read_text(log("decode-again"));
  EXPECT_NE(text.find("resuming " + file("cancel.txt") + ": " + std::to_string(done) + " of 60"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" 0 chunk(s) redone"), std::string::npos) << text;
  EXPECT_EQ(read_text(file("cancel.txt")), expected);
}

// The time limit's warning, as SLURM sends it (--signal=B:USR1: to the batch script alone),
// once some chunks are done: the script stops the launcher, the ranks finish their chunks, the job
// is requeued and the requeued run finishes the file.
TEST_F(Slurm, ADecodeJobWarnedOfItsTimeLimitIsRequeuedAndTheRequeuedRunFinishesTheFile) {
  const std::string& expected = decode_reference();
  BackgroundCommand job("exec " + sbatch("decode-limit", "decode " + decode_args("limit.txt")));
  ASSERT_TRUE(job.wait_for_line("Submitted batch job")) << job.output();
  const std::string id = job_id(job.output());
  BackgroundCommand output(follow("decode-limit", 300));
  ASSERT_TRUE(output.wait_until([] { return decode_parts("limit.txt") >= 3; }))
      << output.output();
  ASSERT_EQ(run_command(slurm("scancel --batch --signal=USR1 " + id)).exit_code, 0);
  ASSERT_TRUE(output.wait_for_line("requeueing job " + id)) << output.output();
  EXPECT_EQ(job.wait(), 0) << job.output();
  const std::string text = read_text(log("decode-limit"));
  EXPECT_NE(text.find("tandem-decode: stopped by SIGTERM; "), std::string::npos) << text;
  EXPECT_NE(text.find("resuming " + file("limit.txt")), std::string::npos) << text;
  EXPECT_NE(text.find(" 0 chunk(s) redone"), std::string::npos) << text;
  EXPECT_EQ(job_state(id), "COMPLETED");
  EXPECT_EQ(read_text(file("limit.txt")), expected);
}

// Two nodes, one task each, under the script's --no-kill. Rank 1 (on nodeB) stops itself at the
// start of step 37; then nodeB's link goes down, as a node that died. SLURM sets nodeB DOWN and
// ends the step of mpirun's daemon there, mpirun exits (with status 0, which the launcher does not
// take for a finished job), and the launcher relaunches on nodeA alone from step 30 at one rank
// with twice the accumulation. The job completes; its first 30 steps are bitwise those of
// tandem-train --ranks 2, and its last 30 those of one rank resumed from its step-30 checkpoint.
TEST_F(SlurmTwoNodes, ANodeLostMidRunLeavesTheJobToFinishOnTheOther) {
  const std::string path = config("nodes", 60);
  BackgroundCommand job(
      "exec " +
      sbatch("nodes", path, "", "TANDEM_FAULT_INJECT=rank=1,step=37,kind=sigstop,restart=0"));
  ASSERT_TRUE(job.wait_for_line("Submitted batch job")) << job.output();
  const std::string id = job_id(job.output());
  BackgroundCommand output(follow("nodes", 300));
  // Rank 1 stops itself at the start of step 37, once step 36 is done.
  ASSERT_TRUE(output.wait_until([] { return reached_step(metrics("nodes"), 36); }))
      << output.output();
  const auto failed = run_command(kCluster + " fail " + dir_->file("cluster") + " nodeB");
  ASSERT_EQ(failed.exit_code, 0) << failed.output;
  EXPECT_EQ(job.wait(), 0) << job.output();

  const std::string text = read_text(log("nodes"));
  EXPECT_NE(text.find("tandem-train: 2 ranks on 2 host(s) under mpirun"), std::string::npos)
      << text;
  EXPECT_EQ(checkpoint::load_description(dir_->file("nodes") + "/" + checkpoint::step_file_name(30))
                .world_size,
            2);
  const std::string restart =
      "tandem-train: restart 1 of 3: the job: mpirun exited with status 0 before rank 0 said "
      "the job finished; resuming from step 30 (" +
      dir_->file("nodes") + "/" + checkpoint::step_file_name(30) + ") at 1 rank(s) without nodeB";
  EXPECT_NE(text.find(restart), std::string::npos) << text;
  EXPECT_EQ(checkpoint::load_description(dir_->file("nodes/last.h5")).step, 60);
  EXPECT_EQ(job_state(id), "COMPLETED");
  EXPECT_EQ(state("node nodeB", "State"), "DOWN");  // SLURM saw it fail; --no-kill kept the job

  const auto at_30 = checkpoint::load(dir_->file("nodes") + "/" + checkpoint::step_file_name(30));
  expect_same(at_30, reference("nodes-ref", 30));
  // The relaunch's steps: one rank resuming from the job's step-30 checkpoint, accumulation 2.
  run_command("mkdir -p " + dir_->file("nodes-one") + " && cp " + dir_->file("nodes") + "/" +
              checkpoint::step_file_name(30) + " " + dir_->file("nodes-one"));
  const auto one = run_command(tool("tandem-train") + " --config " + config("nodes-one", 60) +
                               " --set train.accum_steps=2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  expect_same(checkpoint::load(dir_->file("nodes/last.h5")),
              checkpoint::load(dir_->file("nodes-one/last.h5")));
}

// This machine's name removed from /etc/hosts (in a mount namespace of the test's own, over a copy
// without it): the cluster cannot start, and says so at once instead of retrying the lookup in
// every daemon and command for minutes; nothing it started is left.
TEST(SlurmClusterStart, FailsAtOnceNamingAMachineNameThatDoesNotResolve) {
  const auto check = run_command(kCluster + " --check");
  if (check.exit_code != 0) GTEST_SKIP() << check.output;
  // A mount namespace of its own (none in a chroot or a container without namespaces).
  const auto mount_ns = run_command("unshare --mount --propagation private true");
  if (mount_ns.exit_code != 0) {
    GTEST_SKIP() << "cannot make a mount namespace here: " << mount_ns.output;
  }
  const TempDir dir("slurm-unresolved");
  const std::string host = lines_of(run_command("hostname -s").output).front();
  write_file(dir.file("hosts"), "127.0.0.1 localhost\n");
  const auto started = run_command(
      "timeout 60 unshare --mount --propagation private sh -c 'mount --bind " + dir.file("hosts") +
      " /etc/hosts && if getent hosts " + host + " >/dev/null; then echo resolves; exit 77; fi; " +
      "exec " + kCluster + " start " + dir.file("cluster") + "'");
  if (started.exit_code == 77) GTEST_SKIP() << host << " still resolves here: " << started.output;
  EXPECT_EQ(started.exit_code, 1) << started.output;  // 124: not within 60 s
  EXPECT_NE(started.output.find("local-cluster: this machine's name '" + host +
                                "' does not resolve"),
            std::string::npos)
      << started.output;
  EXPECT_TRUE(cluster_processes(dir.file("cluster")).empty()) << started.output;
}

// A cluster whose owner is killed (as CTest kills a test that runs past its timeout) is stopped
// by the watcher start left: the daemons, which detach from their caller, end too.
TEST(SlurmClusterStart, IsStoppedWhenItsOwnerIsKilled) {
  const auto check = run_command(kCluster + " --check");
  if (check.exit_code != 0) GTEST_SKIP() << check.output;
  const TempDir dir("slurm-owner");
  BackgroundCommand owner("exec tail -f /dev/null");
  const auto started = run_command("TANDEM_SLURM_OWNER=" + std::to_string(owner.pid()) + " " +
                                   kCluster + " start " + dir.file("cluster"));
  ASSERT_EQ(started.exit_code, 0) << started.output;
  const std::vector<int> running = cluster_processes(dir.file("cluster"));
  ASSERT_GE(running.size(), 3u) << "munged, slurmctld and slurmd";
  owner.kill_all();
  owner.wait();  // reaped, as CTest reaps a test it killed (a zombie still counts as running)
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (const int pid : running) EXPECT_TRUE(wait_until_ended(pid, deadline)) << "pid " << pid;
  EXPECT_TRUE(cluster_processes(dir.file("cluster")).empty());
}

// Bad input, which needs no cluster: the script outside a job, and an allocation of more GPUs
// than tasks on a node (8 GPUs to one rank), are refused with one line saying what to do.
TEST(SlurmScript, RefusesToRunOutsideAJobOrWithFewerTasksThanGpus) {
  const auto outside = run_command("env -u SLURM_JOB_ID bash " + kScript + " any.yaml");
  EXPECT_EQ(outside.exit_code, 2) << outside.output;
  EXPECT_EQ(outside.output,
            "tandem.sbatch: not inside a SLURM job: submit it with sbatch (see its #SBATCH "
            "lines)\n");
  const auto few = run_command(
      "env SLURM_JOB_ID=7 SLURM_JOB_NODELIST=node01 SLURM_TASKS_PER_NODE=1 SLURM_GPUS_ON_NODE=8 "
      "bash " +
      kScript + " any.yaml");
  EXPECT_EQ(few.exit_code, 2) << few.output;
  EXPECT_EQ(few.output,
            "tandem.sbatch: 8 GPUs per node but 1 task(s) on this node: pass --ntasks-per-node=8 "
            "to sbatch (one task, one rank, per GPU)\n");
}

}  // namespace
}  // namespace tandem::test
