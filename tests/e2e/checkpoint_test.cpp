// Checkpoints through the real tools: damaged files give one-line errors, kill -9 during writes
// never costs the newest complete checkpoint, SIGTERM saves and resume continues, and
// tandem-average's output is the mean that eval and decode accept.
#include <gtest/gtest.h>
#include <hdf5.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

const char* kParameter = "encoder.layers.0.self_attn.q_proj.weight";

class CheckpointE2E : public ::testing::Test {
 protected:
  // One corpus, and one short single-process run with checkpoints at steps 2 and 4.
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-checkpoint");
    make_reverse_corpus(dir_->path());
    const auto base = run_command(tool("tandem-train") + " --config " + config("base") +
                                  " --set train.max_steps=4 --set checkpoint.every_steps=2");
    ASSERT_EQ(base.exit_code, 0) << base.output;
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string run_dir(const std::string& run) { return file("run-" + run); }
  static std::string base_step(int64_t step) {
    return run_dir("base") + "/" + checkpoint::step_file_name(step);
  }

  // The pipeline test's small model (1+1 layers of width 32, dropout on), logging every step,
  // checkpointing into run-<run>.
  static std::string config(const std::string& run) {
    const std::string path = file(run + ".yaml");
    write_file(path, "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, dropout: 0.1}\n"
                     "data: {corpus: " + file("corpus.h5") + ", max_tokens: 256, seed: 3}\n"
                     "train: {max_steps: 3000, lr: 0.003, clip_norm: 1.0, seed: 5, threads: 1}\n"
                     "checkpoint: {dir: " + run_dir(run) + ", every_steps: 1, keep_last: 3}\n"
                     "log: {every_steps: 1}\n");
    return path;
  }

  static std::vector<int64_t> logged_steps(const std::string& run) {
    std::ifstream in(run_dir(run) + "/metrics.jsonl");
    std::vector<int64_t> steps;
    for (std::string line; std::getline(in, line);) {
      steps.push_back(nlohmann::json::parse(line)["step"].get<int64_t>());
    }
    return steps;
  }

  static TempDir* dir_;
};
TempDir* CheckpointE2E::dir_ = nullptr;

std::vector<int64_t> one_to(int64_t last) {
  std::vector<int64_t> steps;
  for (int64_t s = 1; s <= last; ++s) steps.push_back(s);
  return steps;
}

// A copy of `from` with one byte of `dataset`'s stored data flipped (located with
// H5Dget_chunk_info: a small tensor is one chunk, its data then a 4-byte Fletcher32 checksum).
void copy_with_flipped_byte(const std::string& from, const std::string& to, const std::string& dataset) {
  fs::copy_file(from, to, fs::copy_options::overwrite_existing);
  haddr_t address = HADDR_UNDEF;
  const hid_t file = H5Fopen(to.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const hid_t data = H5Dopen2(file, dataset.c_str(), H5P_DEFAULT);
  const hid_t space = H5Dget_space(data);
  hsize_t offset[2];
  unsigned filter_mask = 0;
  hsize_t size = 0;
  const herr_t status = H5Dget_chunk_info(data, space, 0, offset, &filter_mask, &address, &size);
  H5Sclose(space);
  H5Dclose(data);
  H5Fclose(file);
  ASSERT_GE(status, 0) << dataset;
  std::fstream out(to, std::ios::in | std::ios::out | std::ios::binary);
  const auto at = static_cast<std::streamoff>(address + size / 2);
  out.seekg(at);
  char byte = 0;
  out.read(&byte, 1);
  byte = static_cast<char>(byte ^ 0x40);
  out.seekp(at);
  out.write(&byte, 1);
}

// One line, exit code 2, naming the file and the problem.
void expect_one_line_error(const std::string& command, const std::string& path,
                           const std::string& problem) {
  const auto r = run_command(command);
  EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << command << "\n" << r.output;
  EXPECT_NE(r.output.find("'" + path + "'"), std::string::npos) << command << "\n" << r.output;
  EXPECT_NE(r.output.find(problem), std::string::npos) << command << "\n" << r.output;
}

TEST_F(CheckpointE2E, DamagedOrForeignCheckpointsGiveOneLineErrorsAndExitCode2) {
  const std::string good = base_step(4);
  const std::string truncated = file("truncated.h5");
  fs::copy_file(good, truncated);
  const auto size = fs::file_size(truncated);
  fs::resize_file(truncated, size / 2);
  const std::string flipped = file("flipped.h5");
  copy_with_flipped_byte(good, flipped, std::string("/model/") + kParameter);
  const std::string text = file("text.h5");
  write_file(text, "model: {d_model: 32}\n");
  // Tensors of another shape than the model its own config describes.
  const std::string reshaped = file("reshaped.h5");
  auto data = checkpoint::load(good);
  for (auto& [name, tensor] : data.model) {
    if (name == kParameter) tensor = torch::zeros({48, 32});
  }
  checkpoint::save(reshaped, data);

  struct Case {
    std::string path, problem;
  };
  const std::string checksum = std::string("dataset /model/") + kParameter + " (checksum mismatch";
  const std::vector<Case> cases = {
      {truncated, "the file is truncated: " + std::to_string(size / 2) + " of " +
                      std::to_string(size) + " bytes"},
      {flipped, checksum},
      {text, "not an HDF5 file"},
      {reshaped, "shape of " + std::string(kParameter) + ": checkpoint [48, 32] vs model [32, 32]"},
  };
  const std::string train = tool("tandem-train") + " --config " + config("errors") + " --resume ";
  for (const Case& c : cases) {
    expect_one_line_error(tool("tandem-eval") + " --checkpoint " + c.path + " --split test",
                          c.path, c.problem);
    expect_one_line_error(train + c.path, c.path, c.problem);
  }
  // A sound checkpoint of a narrower model than the one configured.
  expect_one_line_error(train + good + " --set model.d_model=48", good,
                        "shape of " + std::string(kParameter) + ": checkpoint [32, 32] vs model [48, 48]");
}

// Everything a kill can leave in `run`: the newest step file find_latest picks and every other
// step file load completely (none half-written), and so does last.h5 when present. Returns the
// file training must resume from.
std::string expect_intact_after_kill(const std::string& run) {
  const std::string latest = checkpoint::find_latest(run);
  const auto files = checkpoint::step_files(run);
  EXPECT_FALSE(latest.empty()) << run;
  if (latest.empty()) return "";
  EXPECT_EQ(latest, files.front()) << "a newer step file does not open";
  int64_t latest_step = -1;
  for (const std::string& path : files) {
    try {
      const auto data = checkpoint::load(path);
      EXPECT_EQ(fs::path(path).filename().string(), checkpoint::step_file_name(data.step));
      if (path == latest) latest_step = data.step;
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  }
  if (fs::exists(run + "/last.h5")) {
    try {
      EXPECT_LE(checkpoint::load(run + "/last.h5").step, latest_step);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "half-written last.h5: " << e.what();
    }
  }
  return latest;
}

// Whether a *.tmp file in `run` was written since `since`, i.e. the kill cut a write short.
bool write_was_interrupted(const std::string& run, fs::file_time_type since) {
  for (const auto& entry : fs::directory_iterator(run)) {
    if (entry.path().extension() == ".tmp" && entry.last_write_time() >= since) return true;
  }
  return false;
}

// Every round after the first resumes from what the previous kill left (and must say so, naming
// the file find_latest picked); the last resume runs to its end and exits 0.
TEST_F(CheckpointE2E, KillDashNineDuringCheckpointWritesAlwaysLeavesAResumableCheckpoint) {
  constexpr int kRounds = 20;
  const std::string cfg = config("killed");
  const std::string run = run_dir("killed");
  std::mt19937 random(20240611);
  std::uniform_int_distribution<int> saves_first(1, 3);
  // A checkpoint write of this model takes ~10-40 ms on 2 cores and starts right after a
  // progress line, so a kill in the 40 ms after one lands in or next to a write.
  std::uniform_int_distribution<int> delay_us(0, 40000);
  std::string resume_from;
  int interrupted = 0;
  for (int round = 0; round < kRounds; ++round) {
    const auto started = fs::file_time_type::clock::now();
    BackgroundCommand job("exec " + mpirun(2) + tool("tandem-train") + " --config " + cfg);
    if (!resume_from.empty()) {
      ASSERT_TRUE(job.wait_for_line("resuming from " + resume_from + " at step")) << job.output();
    }
    for (int saved = saves_first(random); saved > 0; --saved) {
      ASSERT_TRUE(job.wait_for_line("] saved ")) << job.output();
    }
    ASSERT_TRUE(job.wait_for_line("] step ")) << job.output();
    // Not a wait for anything: a random 0-40 ms offset puts the kill anywhere in a step or a save,
    // and every point must leave the run intact (the waits above are on the job's own lines).
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us(random)));
    job.kill_all();
    EXPECT_EQ(job.wait(), 128 + SIGKILL);
    interrupted += write_was_interrupted(run, started) ? 1 : 0;
    resume_from = expect_intact_after_kill(run);
    ASSERT_FALSE(HasFailure()) << "round " << round << "\n" << job.output();
  }
  std::cout << "[          ] " << interrupted << " of " << kRounds
            << " kills cut a checkpoint write short\n";
  EXPECT_GT(interrupted, 0) << "no kill landed inside a write: the test proves nothing";
  const int64_t step = checkpoint::load(resume_from).step;
  const auto last = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                                " --set train.max_steps=" + std::to_string(step + 2));
  EXPECT_EQ(last.exit_code, 0) << last.output;
  EXPECT_NE(last.output.find("resuming from " + resume_from), std::string::npos) << last.output;
  EXPECT_EQ(logged_steps("killed"), one_to(step + 2));
}

TEST_F(CheckpointE2E, SigtermToMpirunSavesTheCurrentStepAndResumeContinuesFromIt) {
  const std::string cfg = config("sigterm");
  const std::string run = run_dir("sigterm");
  // With the grace docs/multi-node.md asks of a plain mpirun (the launcher and train-hosts.sh set
  // it): Open MPI 4.1 answers SIGTERM with SIGCONT to the ranks, SIGTERM one grace later and
  // SIGKILL one grace after that, so a rank has the grace to finish its step and save, however slow
  // the machine. mpirun reads none of the ranks' output meanwhile: this model logs steps of under a
  // millisecond, so rank 0 fills its pipe to mpirun well before its SIGTERM, and what it logs after
  // it may be dropped (jobs/stop_handler.cpp); the checkpoint and the metrics file say what
  // happened.
  BackgroundCommand job("exec " + mpirun(2) + "--mca odls_base_sigkill_timeout 10 " +
                        tool("tandem-train") + " --config " + cfg +
                        " --set checkpoint.every_steps=100000");
  ASSERT_TRUE(job.wait_for_line("] step 3 |")) << job.output();
  job.signal(SIGTERM);
  // The ranks exit with 128 + 15, but mpirun itself then exits with 1, not 143 (signalled
  // directly, the ranks' 143 is what mpirun returns: next test).
  EXPECT_EQ(job.wait(), 1) << job.output();
  const auto steps = logged_steps("sigterm");
  ASSERT_FALSE(steps.empty());
  const int64_t stopped = steps.back();
  EXPECT_GE(stopped, 3);
  EXPECT_EQ(steps, one_to(stopped));
  const std::string saved = run + "/" + checkpoint::step_file_name(stopped);
  EXPECT_EQ(checkpoint::find_latest(run), saved) << job.output();
  EXPECT_EQ(checkpoint::load(saved).step, stopped);

  const auto resumed = run_command(mpirun(2) + tool("tandem-train") + " --config " + cfg +
                                   " --set train.max_steps=" + std::to_string(stopped + 3));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from " + saved + " at step " + std::to_string(stopped)),
            std::string::npos)
      << resumed.output;
  EXPECT_EQ(logged_steps("sigterm"), one_to(stopped + 3));  // no gap, no step logged twice
}

TEST_F(CheckpointE2E, SigtermToTheRanksSavesAndMpirunExitsWith143) {
  const std::string run = run_dir("sigterm-ranks");
  BackgroundCommand job("exec " + mpirun(2) + tool("tandem-train") + " --config " +
                        config("sigterm-ranks") + " --set checkpoint.every_steps=100000");
  ASSERT_TRUE(job.wait_for_line("] step 3 |")) << job.output();
  // As a batch scheduler does: every rank gets the signal at once, mpirun none (the pattern
  // matches the ranks' command lines, which start with the program, not mpirun's).
  ASSERT_EQ(run_command("pkill -TERM -f '^" + tool("tandem-train") + " --config " +
                        file("sigterm-ranks.yaml") + "'").exit_code, 0);
  EXPECT_EQ(job.wait(), 128 + SIGTERM) << job.output();
  const int64_t stopped = logged_steps("sigterm-ranks").back();
  EXPECT_EQ(checkpoint::find_latest(run), run + "/" + checkpoint::step_file_name(stopped));
}

// Each element of the mean by a plain loop: float64 sum, halved, rounded once to float32.
torch::Tensor naive_mean(const torch::Tensor& a, const torch::Tensor& b) {
  const torch::Tensor x = a.to(torch::kFloat64).contiguous(), y = b.to(torch::kFloat64).contiguous();
  torch::Tensor mean = torch::empty_like(x);
  for (int64_t i = 0; i < x.numel(); ++i) {
    mean.data_ptr<double>()[i] = (x.data_ptr<double>()[i] + y.data_ptr<double>()[i]) / 2.0;
  }
  return mean.to(torch::kFloat32);
}

TEST_F(CheckpointE2E, AveragedCheckpointIsTheElementwiseMeanAndEvalAndDecodeReadIt) {
  const std::string averaged = file("averaged.h5");
  const auto r = run_command(tool("tandem-average") + " --dir " + run_dir("base") +
                             " --last 2 --out " + averaged);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto a = checkpoint::load(base_step(2)), b = checkpoint::load(base_step(4));
  const auto mean = checkpoint::load(averaged);
  EXPECT_EQ(mean.step, 4);
  EXPECT_EQ(mean.averaged_from, (std::vector<std::string>{base_step(2), base_step(4)}));
  EXPECT_EQ(mean.config_yaml, b.config_yaml);
  EXPECT_EQ(mean.vocab, b.vocab);
  EXPECT_TRUE(mean.optimizer.empty());
  ASSERT_EQ(mean.model.size(), a.model.size());
  for (size_t i = 0; i < mean.model.size(); ++i) {
    EXPECT_EQ(mean.model[i].first, a.model[i].first);
    EXPECT_TRUE(torch::equal(mean.model[i].second, naive_mean(a.model[i].second, b.model[i].second)))
        << mean.model[i].first;
  }

  const auto eval = run_command(tool("tandem-eval") + " --checkpoint " + averaged + " --split test");
  EXPECT_EQ(eval.exit_code, 0) << eval.output;
  EXPECT_NE(eval.output.find("BLEU"), std::string::npos) << eval.output;
  const auto decoded = run_command(tool("tandem-decode") + " --checkpoint " + averaged + " < " +
                                   file("test.src") + " 2>/dev/null");
  EXPECT_EQ(decoded.exit_code, 0) << decoded.output;
  EXPECT_EQ(std::count(decoded.output.begin(), decoded.output.end(), '\n'), 40);

  // Training continues from it only with fresh optimizer state, and the error says so.
  expect_one_line_error(tool("tandem-train") + " --config " + config("from-average") +
                            " --resume " + averaged,
                        averaged, "resume from it with --reset-optimizer");
  const auto tuned = run_command(tool("tandem-train") + " --config " + config("from-average") +
                                 " --resume " + averaged + " --reset-optimizer --set train.max_steps=6");
  EXPECT_EQ(tuned.exit_code, 0) << tuned.output;

  // Files named on the command line instead of --dir/--last: the same mean.
  const auto named = run_command(tool("tandem-average") + " " + base_step(2) + " " + base_step(4) +
                                 " --out " + file("named.h5"));
  ASSERT_EQ(named.exit_code, 0) << named.output;
  const auto same = checkpoint::load(file("named.h5"));
  for (size_t i = 0; i < mean.model.size(); ++i) {
    EXPECT_TRUE(torch::equal(same.model[i].second, mean.model[i].second)) << mean.model[i].first;
  }
}

TEST_F(CheckpointE2E, AveragingCheckpointsOfDifferentShapesNamesTheFile) {
  auto data = checkpoint::load(base_step(4));
  for (auto& [name, tensor] : data.model) {
    if (name == kParameter) tensor = torch::zeros({48, 32});
  }
  const std::string wide = file("wide.h5");
  checkpoint::save(wide, data);
  expect_one_line_error(tool("tandem-average") + " " + base_step(2) + " " + wide + " --out " +
                            file("never.h5"),
                        wide, "shape of " + std::string(kParameter));
  EXPECT_FALSE(fs::exists(file("never.h5")));
  expect_one_line_error(tool("tandem-average") + " --dir " + run_dir("base") + " --last 3 --out " +
                            file("never.h5"),
                        run_dir("base"), "holds 2 step-*.h5 file(s), fewer than 3");
}

}  // namespace
}  // namespace tandem::test
