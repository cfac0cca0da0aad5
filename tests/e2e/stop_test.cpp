// Stopping a job without losing work, through the real tools: SIGTERM and SIGINT to the launcher
// (tandem-train --ranks 2) save the current step before it returns, and the resumed run equals an
// uninterrupted one bitwise; a second job on the same checkpoint.dir is refused and a dead job's
// lock is taken over, a second command beside a running or a stopping job is refused at once and
// one just after it ends resumes, and a job ending as the next starts leaves the next its records;
// a non-finite gradient on one rank makes every rank skip that step; a save
// into a full filesystem is one readable line and leaves the previous checkpoint loadable.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/jobs/rank_state.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

class StopE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-stop");
    make_reverse_corpus(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string run_dir(const std::string& run) { return dir_->file("run-" + run); }
  static std::string metrics(const std::string& run) { return run_dir(run) + "/metrics.jsonl"; }
  // Waits until `run` has logged step `step` (in metrics.jsonl, not its log lines).
  static bool reached(BackgroundCommand& job, const std::string& run, int64_t step) {
    return job.wait_until([&] { return reached_step(metrics(run), step); });
  }

  // The pipeline test's small model (dropout on, so resuming must restore every rank's stream),
  // logging every step into run-<run>, saving every `every` steps.
  static std::string config(const std::string& run, int every = 100000, int keep = 3) {
    const std::string path = dir_->file(run + ".yaml");
    write_file(path,
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, "
               "dropout: 0.1}\n"
               "data: {corpus: " +
                   dir_->file("corpus.h5") +
                   ", max_tokens: 256, seed: 3}\n"
                   "train: {max_steps: 3000, lr: 0.003, clip_norm: 1.0, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   run_dir(run) + ", every_steps: " + std::to_string(every) +
                   ", keep_last: " + std::to_string(keep) +
                   "}\n"
                   "log: {every_steps: 1}\n");
    return path;
  }

  static std::vector<nlohmann::json> records(const std::string& run) {
    std::ifstream in(run_dir(run) + "/metrics.jsonl");
    std::vector<nlohmann::json> out;
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  }

  static TempDir* dir_;
};
TempDir* StopE2E::dir_ = nullptr;

std::string launcher(const std::string& config) {
  return tool("tandem-train") + " --ranks 2 --config " + config;
}

bool same_tensors(const checkpoint::NamedTensors& a, const checkpoint::NamedTensors& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].first != b[i].first || !torch::equal(a[i].second, b[i].second)) return false;
  }
  return true;
}

// Both signals stop a run; each resumes to 2 steps past its stop, and one uninterrupted run
// saving every step is the reference for both.
TEST_F(StopE2E, SigtermAndSigintToTheLauncherSaveTheStepAndResumeEqualsAnUninterruptedRun) {
  std::vector<std::pair<std::string, int64_t>> stops;  // run, step it stopped at
  for (const int sig : {SIGTERM, SIGINT}) {
    const std::string run = sig == SIGTERM ? "sigterm" : "sigint";
    BackgroundCommand job("exec " + launcher(config(run)));
    ASSERT_TRUE(reached(job, run, 3)) << job.output();
    job.signal(sig);
    EXPECT_EQ(job.wait(), 128 + sig) << job.output();
    // When the launcher has returned, the step it stopped at is complete on disk.
    const int64_t stopped = records(run).back()["step"];
    const std::string saved = checkpoint::find_latest(run_dir(run));
    EXPECT_EQ(saved, run_dir(run) + "/" + checkpoint::step_file_name(stopped)) << job.output();
    EXPECT_EQ(checkpoint::load(saved).step, stopped);
    EXPECT_NE(job.output().find("every rank finishes its step and saves a checkpoint; the same "
                                "again from the same sender stops at once"),
              std::string::npos)
        << job.output();
    EXPECT_NE(job.output().find("the last step is saved"), std::string::npos) << job.output();
    const auto resumed = run_command(launcher(config(run)) +
                                     " --set train.max_steps=" + std::to_string(stopped + 2));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
    stops.emplace_back(run, stopped);
  }
  const int64_t last = std::max(stops[0].second, stops[1].second) + 2;
  const auto reference = run_command(launcher(config("straight", 1, 0)) +
                                     " --set train.max_steps=" + std::to_string(last));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const auto straight = records("straight");
  for (const auto& [run, stopped] : stops) {
    SCOPED_TRACE(run);
    const auto resumed = records(run);
    ASSERT_EQ(resumed.size(), static_cast<size_t>(stopped + 2));
    for (size_t i = 0; i < resumed.size(); ++i) {
      EXPECT_EQ(resumed[i]["loss"].get<double>(), straight[i]["loss"].get<double>()) << i + 1;
    }
    const auto a = checkpoint::load(run_dir(run) + "/last.h5");
    const auto b =
        checkpoint::load(run_dir("straight") + "/" + checkpoint::step_file_name(stopped + 2));
    EXPECT_TRUE(same_tensors(a.model, b.model));
    for (const auto& [group, tensors] : b.optimizer) {
      EXPECT_TRUE(same_tensors(a.optimizer.at(group), tensors)) << group;
    }
  }
}

// A rank on its own (no launcher; the state folder a launcher would name). Stop signals from three
// processes, as one scancel reaches a rank from SLURM and again through mpirun, are one stop that
// saves the step and is recorded as a stop; two from one sender (a person insisting) stop at once,
// before the save, leaving no record. Each is a different signal: the kernel keeps one of each
// pending, where a second SIGTERM sent before the first is delivered would merge into it.
TEST_F(StopE2E, AStopFromAnotherProcessChangesNothingAndTheSameSenderTwiceStopsAtOnce) {
  const auto alone = [](const std::string& run) {
    fs::create_directories(run_dir(run) + "-state");
    return "exec env TANDEM_STATE_DIR=" + run_dir(run) + "-state " + tool("tandem-train") +
           " --config " + config(run);
  };
  {
    BackgroundCommand rank(alone("senders"));
    ASSERT_TRUE(reached(rank, "senders", 3)) << rank.output();
    const std::string pid = std::to_string(rank.pid());
    rank.signal(SIGTERM);              // from this process
    run_command("kill -USR1 " + pid);  // from a shell of its own
    run_command("kill -INT " + pid);   // and another
    EXPECT_EQ(rank.wait(), 128 + SIGTERM) << rank.output();
    const int64_t stopped = records("senders").back()["step"];
    EXPECT_EQ(checkpoint::find_latest(run_dir("senders")),
              run_dir("senders") + "/" + checkpoint::step_file_name(stopped));
    const auto states = jobs::read_rank_states(run_dir("senders") + "-state");
    ASSERT_EQ(states.size(), 1u) << rank.output();
    EXPECT_EQ(states[0].outcome, jobs::RankState::Outcome::kStopped);
    EXPECT_EQ(states[0].signal, SIGTERM);
    EXPECT_EQ(states[0].exit_code, 128 + SIGTERM);
    EXPECT_EQ(states[0].at, stopped);
  }
  BackgroundCommand rank(alone("insist"));
  ASSERT_TRUE(reached(rank, "insist", 3)) << rank.output();
  rank.signal(SIGTERM);
  rank.signal(SIGINT);
  const int code = rank.wait();
  EXPECT_TRUE(code == 128 + SIGTERM || code == 128 + SIGINT) << code << rank.output();
  EXPECT_TRUE(jobs::read_rank_states(run_dir("insist") + "-state").empty()) << rank.output();
  EXPECT_EQ(checkpoint::find_latest(run_dir("insist")), "") << "nothing saved: no step was due";
}

TEST_F(StopE2E, ASecondJobOnTheSameDirectoryExitsTwoNamingTheFirst) {
  const std::string cfg = config("shared");
  BackgroundCommand first("exec " + tool("tandem-train") + " --config " + cfg);
  ASSERT_TRUE(reached(first, "shared", 1)) << first.output();
  std::ifstream lock(run_dir("shared") + "/tandem.lock");
  std::string holder((std::istreambuf_iterator<char>(lock)), std::istreambuf_iterator<char>());
  std::istringstream fields(holder);
  std::string host_key, host, pid_key, pid, started_key, started;
  fields >> host_key >> host >> pid_key >> pid >> started_key >> started;
  ASSERT_FALSE(started.empty()) << holder;
  for (const std::string& second : {tool("tandem-train") + " --config " + cfg, launcher(cfg)}) {
    const auto refused = run_command(second);
    EXPECT_EQ(refused.exit_code, 2) << refused.output;
    EXPECT_NE(refused.output.find("is in use by another job (host " + host + ", pid " + pid +
                                  ", started " + started + ")"),
              std::string::npos)
        << refused.output;
  }
  first.signal(SIGTERM);
  EXPECT_EQ(first.wait(), 128 + SIGTERM) << first.output();
  EXPECT_FALSE(fs::exists(run_dir("shared") + "/tandem.lock"));  // released on the way out
}

// A second command beside a running launcher's job is refused at once (exit 2 naming the holder,
// before any rank of it trains) and changes nothing of the job: it finishes in the bytes of an
// undisturbed run.
TEST_F(StopE2E, ASecondCommandBesideARunningJobIsRefusedAndTheJobWritesTheBytesOfAnUndisturbedRun) {
  const std::string steps = " --set train.max_steps=8";
  const auto undisturbed = run_command(launcher(config("undisturbed")) + steps);
  ASSERT_EQ(undisturbed.exit_code, 0) << undisturbed.output;
  const std::string cfg = config("beside");
  BackgroundCommand running("exec " + launcher(cfg) + steps);
  ASSERT_TRUE(reached(running, "beside", 2)) << running.output();
  // Its rank 0 held (SIGSTOP) while the second command runs, so that the job is still running
  // however fast its steps are; holding it changes none of its numbers.
  const int rank0 = running.rank_pid(0);
  ASSERT_GT(rank0, 0);
  ASSERT_EQ(kill(rank0, SIGSTOP), 0);
  const auto started = std::chrono::steady_clock::now();
  const auto refused = run_command(launcher(cfg) + steps);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - started;
  ASSERT_EQ(kill(rank0, SIGCONT), 0);
  std::printf("the second command was refused in %.1f s\n", took.count());
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("checkpoint.dir '" + run_dir("beside") +
                                "' is in use by another job (host "),
            std::string::npos)
      << refused.output;
  EXPECT_LT(took.count(), 60) << "refused at once, not after waiting for the running job";
  ASSERT_EQ(running.wait(), 0) << running.output();
  const auto a = checkpoint::load(run_dir("beside") + "/last.h5");
  const auto b = checkpoint::load(run_dir("undisturbed") + "/last.h5");
  EXPECT_EQ(a.step, 8);
  EXPECT_TRUE(same_tensors(a.model, b.model));
  for (const auto& [group, tensors] : b.optimizer) {
    EXPECT_TRUE(same_tensors(a.optimizer.at(group), tensors)) << group;
  }
}

// A stop as pkill sends it (SIGTERM to the launcher), the same command again while the first job
// is still stopping (its rank 0, held with SIGSTOP, still holds checkpoint.dir), and again once the
// first has exited: the second is refused (exit 2 naming the first) and changes nothing of it; the
// third resumes from the saved step and finishes (exit 0: its ranks' records reached its
// launcher intact).
TEST_F(StopE2E, TheSameCommandWhileAStopIsUnderWayIsRefusedAndOnceItEndsResumes) {
  const std::string cfg = config("again");
  BackgroundCommand first("exec " + launcher(cfg));
  ASSERT_TRUE(reached(first, "again", 3)) << first.output();
  const int rank0 = first.rank_pid(0);
  ASSERT_GT(rank0, 0);
  ASSERT_EQ(kill(rank0, SIGSTOP), 0);
  first.signal(SIGTERM);
  ASSERT_TRUE(first.wait_for_line("every rank finishes its step and saves a checkpoint"))
      << first.output();
  const auto refused = run_command(launcher(cfg));
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("is in use by another job (host "), std::string::npos)
      << refused.output;
  ASSERT_EQ(kill(rank0, SIGCONT), 0);
  EXPECT_EQ(first.wait(), 128 + SIGTERM) << first.output();
  EXPECT_NE(first.output().find("the last step is saved"), std::string::npos) << first.output();
  const int64_t stopped = records("again").back()["step"];
  const auto resumed =
      run_command(launcher(cfg) + " --set train.max_steps=" + std::to_string(stopped + 2));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("saved " + run_dir("again") + "/" +
                                checkpoint::step_file_name(stopped + 2)),
            std::string::npos)
      << resumed.output;
  EXPECT_EQ(checkpoint::load(run_dir("again") + "/last.h5").step, stopped + 2);
}

// The race of a job ending just as the next command on its checkpoint.dir starts (seen when a
// LoRA run was killed and another started 2 s later): the ending job's launcher is held (SIGSTOP)
// once its ranks have saved their stop and gone, the next command starts and trains, then the held
// launcher goes on to read its ranks' records and clean up while the next job's ranks still run
// (its rank 0 held too). Each launch's state folder is its own:
// the next job ends with its ranks' records intact (exit 0, not "mpirun exited with status 0
// before rank 0 said the job finished").
TEST_F(StopE2E, AJobEndingAsTheNextStartsOnItsDirectoryLeavesTheNextJobItsRecords) {
  const std::string cfg = config("handover");
  BackgroundCommand ending("exec " + launcher(cfg));
  ASSERT_TRUE(reached(ending, "handover", 3)) << ending.output();
  const std::vector<int> ranks = {ending.rank_pid(0), ending.rank_pid(1)};
  ASSERT_GT(ranks[0], 0);
  ASSERT_GT(ranks[1], 0);
  ending.signal(SIGSTOP);  // held before it can read or remove anything
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(2);
  for (const int rank : ranks) kill(rank, SIGTERM);  // a scheduler's stop: save, then exit
  for (const int rank : ranks) ASSERT_TRUE(wait_until_ended(rank, deadline)) << rank;
  const int64_t stopped = records("handover").back()["step"];
  ASSERT_EQ(checkpoint::find_latest(run_dir("handover")),
            run_dir("handover") + "/" + checkpoint::step_file_name(stopped));
  BackgroundCommand next("exec " + launcher(cfg) +
                         " --set train.max_steps=" + std::to_string(stopped + 4));
  ASSERT_TRUE(reached(next, "handover", stopped + 1)) << next.output();
  // The next job's rank 0 held too, so that its ranks still run while the ending launcher goes on.
  const int next_rank0 = next.rank_pid(0);
  ASSERT_GT(next_rank0, 0);
  ASSERT_EQ(kill(next_rank0, SIGSTOP), 0);
  ending.signal(SIGCONT);
  ending.wait();
  ASSERT_EQ(kill(next_rank0, SIGCONT), 0);
  EXPECT_EQ(next.wait(), 0) << next.output();
  EXPECT_EQ(next.output().find("cannot write"), std::string::npos) << next.output();
  EXPECT_EQ(checkpoint::load(run_dir("handover") + "/last.h5").step, stopped + 4);
}

TEST_F(StopE2E, ALockLeftByADeadJobIsTakenOver) {
  const std::string cfg = config("dead");
  BackgroundCommand killed("exec " + tool("tandem-train") + " --config " + cfg);
  ASSERT_TRUE(reached(killed, "dead", 1)) << killed.output();
  killed.kill_all();
  killed.wait();
  ASSERT_TRUE(fs::exists(run_dir("dead") + "/tandem.lock"));
  const auto next =
      run_command(tool("tandem-train") + " --config " + cfg + " --set train.max_steps=2");
  EXPECT_EQ(next.exit_code, 0) << next.output;
  EXPECT_NE(next.output.find("taking over " + run_dir("dead") +
                             "/tandem.lock from a job that "
                             "ended without releasing it"),
            std::string::npos)
      << next.output;
}

TEST_F(StopE2E, ANonFiniteGradientOnOneRankMakesEveryRankSkipThatStep) {
  const std::string cfg = config("nan", 1, 0);
  const auto r = run_command("TANDEM_FAULT_INJECT=rank=1,step=3,kind=nan_gradient " + mpirun(2) +
                             tool("tandem-train") + " --config " + cfg +
                             " --set train.max_steps=5 --set dist.check_every_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;  // ranks compared bitwise after every step
  const auto logged = records("nan");
  ASSERT_GE(logged.size(), 5u) << r.output;
  EXPECT_EQ(logged[2]["step"], 3);
  EXPECT_EQ(logged[2]["skipped_updates"], 1) << r.output;
  EXPECT_EQ(logged[3]["skipped_updates"], 0) << r.output;
  const auto step = [&](int s) {
    return checkpoint::load(run_dir("nan") + "/" + checkpoint::step_file_name(s));
  };
  const auto before = step(2), skipped = step(3), after = step(4);
  EXPECT_TRUE(same_tensors(skipped.model, before.model));
  EXPECT_EQ(skipped.optimizer_step, before.optimizer_step);
  for (const auto& [group, tensors] : before.optimizer) {
    EXPECT_TRUE(same_tensors(skipped.optimizer.at(group), tensors)) << group;
  }
  EXPECT_FALSE(same_tensors(after.model, skipped.model));  // training goes on
  EXPECT_EQ(after.optimizer_step, before.optimizer_step + 1);
  EXPECT_TRUE(records("nan")[2]["grad_norm"].is_null());  // NaN has no JSON number
}

// A tmpfs of a few checkpoints' size; mounting one needs root.
class SmallFilesystem {
 public:
  explicit SmallFilesystem(const std::string& path) : path_(path) {
    fs::create_directories(path_);
    mounted_ = mount("tandem-test", path_.c_str(), "tmpfs", 0, "size=1m") == 0;
  }
  ~SmallFilesystem() {
    if (mounted_) umount2(path_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

TEST_F(StopE2E, ASaveIntoAFullFilesystemIsOneLineAndLeavesThePreviousCheckpointLoadable) {
  const SmallFilesystem disk(run_dir("full"));
  if (!disk.mounted()) GTEST_SKIP() << "mounting a 1 MB tmpfs needs root (CAP_SYS_ADMIN)";
  const auto r = run_command(tool("tandem-train") + " --config " + config("full", 1, 0) +
                             " --set train.max_steps=100");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  std::string error_line;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("error: ") != std::string::npos) error_line = line;
  }
  EXPECT_NE(error_line.find("checkpoint: cannot write '" + run_dir("full") + "/step-"),
            std::string::npos)
      << r.output;
  EXPECT_NE(error_line.find("No space left on device (errno 28); it needs about "),
            std::string::npos)
      << error_line;
  EXPECT_NE(error_line.find(" MB are free there; earlier checkpoints are untouched"),
            std::string::npos)
      << error_line;
  const std::string latest = checkpoint::find_latest(run_dir("full"));
  ASSERT_FALSE(latest.empty());
  EXPECT_GE(checkpoint::load(latest).step, 1);
  EXPECT_EQ(checkpoint::load(run_dir("full") + "/last.h5").step, checkpoint::load(latest).step);
}

}  // namespace
}  // namespace tandem::test
