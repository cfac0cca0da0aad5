// Stopping a job without losing work, through the real tools: SIGTERM and SIGINT to the launcher
// (tandem-train --ranks 2) save the current step before it returns, and the resumed run equals an
// uninterrupted one bitwise; a second job on the same checkpoint.dir is refused and a dead job's
// lock is taken over; a non-finite gradient on one rank makes every rank skip that step; a save
// into a full filesystem is one readable line and leaves the previous checkpoint loadable.
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/common/rank_state.h"

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
    const auto states = read_rank_states(run_dir("senders") + "-state");
    ASSERT_EQ(states.size(), 1u) << rank.output();
    EXPECT_EQ(states[0].outcome, RankState::Outcome::kStopped);
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
  EXPECT_TRUE(read_rank_states(run_dir("insist") + "-state").empty()) << rank.output();
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
