// The tools' command lines as a new user meets them: --help shows usage with an example, and a
// mistake ends with exit code 2 and exactly one line on stderr naming what is wrong.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/e2e/run_command.h"
#include "trainer/common/temp_dir.h"
#include "trainer/kernels/cpu/cpu_path.h"

namespace tandem::test {
namespace {

// Runs `command` and keeps only its stderr (stdout is discarded).
CommandResult stderr_of(const std::string& command) {
  return run_command("{ " + command + " 2>&1 >/dev/null; }");
}

size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

TEST(ToolHelp, EveryToolShowsUsageWithAnExampleAndExitsZero) {
  for (const std::string name : {"tandem-train", "tandem-eval", "tandem-decode", "tandem-score",
                                 "tandem-prep", "tandem-average", "tandem-bench",
                                 "tandem-bench-decode", "tandem-export", "tandem-shortlist"}) {
    const auto help = run_command(tool(name) + " --help");
    EXPECT_EQ(help.exit_code, 0) << name << "\n" << help.output;
    EXPECT_NE(help.output.find("Usage:"), std::string::npos) << name << "\n" << help.output;
    EXPECT_NE(help.output.find("Example"), std::string::npos) << name << "\n" << help.output;
    // The examples name the tool itself, not only other commands.
    EXPECT_NE(help.output.find("\n  " + name + " "), std::string::npos) << name << "\n"
                                                                        << help.output;
  }
}

struct ErrorCase {
  std::string command;
  std::string names;  // what the one line must mention
};

class ToolErrors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("cli");
    write_file(file("no-corpus.yaml"), "data: {corpus: " + file("absent.h5") + "}\n");
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string file(const std::string& name) { return dir_->file(name); }

  static void expect_one_line(const ErrorCase& c) {
    const auto result = stderr_of(c.command);
    EXPECT_EQ(result.exit_code, 2) << c.command << "\n" << result.output;
    EXPECT_EQ(count_lines(result.output), 1u) << c.command << "\n" << result.output;
    EXPECT_EQ(result.output.back(), '\n') << c.command << "\n" << result.output;
    EXPECT_NE(result.output.find(c.names), std::string::npos)
        << c.command << "\nshould name '" << c.names << "':\n"
        << result.output;
  }
  static TempDir* dir_;
};
TempDir* ToolErrors::dir_ = nullptr;

TEST_F(ToolErrors, TrainNamesTheUnknownFlag) {
  expect_one_line({tool("tandem-train") + " --config " + file("no-corpus.yaml") + " --bogus-flag",
                   "--bogus-flag"});
}

TEST_F(ToolErrors, TrainNamesTheMissingConfigFile) {
  expect_one_line({tool("tandem-train") + " --config " + file("absent.yaml"), file("absent.yaml")});
}

TEST_F(ToolErrors, TrainNamesTheMisspelledSetKey) {
  expect_one_line(
      {tool("tandem-train") + " --config " + file("no-corpus.yaml") + " --set model.d_modle=64",
       "model.d_modle"});
}

TEST_F(ToolErrors, TrainNamesTheMissingCorpus) {
  expect_one_line(
      {tool("tandem-train") + " --config " + file("no-corpus.yaml"), file("absent.h5")});
}

TEST_F(ToolErrors, EvalNamesTheUnknownFlagAndTheMissingCheckpoint) {
  expect_one_line({tool("tandem-eval") + " --bogus-flag", "--bogus-flag"});
  expect_one_line({tool("tandem-eval") + " --checkpoint " + file("absent.h5") + " --split test",
                   file("absent.h5")});
}

TEST_F(ToolErrors, DecodeNamesTheMissingRequiredFlag) {
  expect_one_line({tool("tandem-decode") + " < /dev/null", "--checkpoint"});
}

TEST_F(ToolErrors, DecodeNamesABadSamplingAndSamplingWithABeam) {
  const std::string decode = tool("tandem-decode") + " --checkpoint " + file("absent.h5");
  expect_one_line({decode + " --sampling topk:0 < /dev/null", "--sampling 'topk:0'"});
  expect_one_line({decode + " --beam 1 --sampling topp:1.5 < /dev/null", "--sampling 'topp:1.5'"});
  expect_one_line({decode + " --sampling topk:5 --beam 4 < /dev/null", "--beam 1"});
  expect_one_line({decode + " --beam 1 --temperature 0.5 < /dev/null", "--sampling"});
}

TEST_F(ToolErrors, DecodeNamesWhatAFileJobLacks) {
  const std::string decode = tool("tandem-decode") + " --checkpoint " + file("absent.h5");
  expect_one_line({decode + " --input " + file("in.txt"), "--output"});
  expect_one_line({decode + " --ranks 2 < /dev/null", "--input"});
  expect_one_line(
      {decode + " --ranks 2 --hostfile " + file("hosts") + " --input a --output b", "--hostfile"});
  expect_one_line({decode + " --input " + file("absent.txt") + " --output " + file("out.txt"),
                   file("absent.txt")});
}

TEST_F(ToolErrors, ScoreNamesAMissingSidePairsThatDoNotMatchAndARankedJobWithoutOutput) {
  write_file(file("three.txt"), "a\nb\nc\n");
  write_file(file("two.txt"), "a\nb\n");
  const std::string score = tool("tandem-score") + " --checkpoint " + file("absent.h5");
  expect_one_line({score + " --src " + file("three.txt"), "--tgt"});
  expect_one_line({score + " --src " + file("three.txt") + " --tgt " + file("two.txt"),
                   "--tgt '" + file("two.txt") + "' has 2 lines but --src"});
  expect_one_line(
      {score + " --src " + file("three.txt") + " --tgt " + file("three.txt") + " --ranks 2",
       "--output"});
  expect_one_line(
      {score + " --src " + file("three.txt") + " --tgt " + file("three.txt"), file("absent.h5")});
}

TEST_F(ToolErrors, DecodeNamesANegativeMinLength) {
  expect_one_line(
      {tool("tandem-decode") + " --checkpoint " + file("absent.h5") + " --min-len -1 < /dev/null",
       "--min-len"});
}

// A number out of its range says what is wanted, not the range of a double printed in full.
TEST_F(ToolErrors, ANumberOutOfItsRangeSaysWhatIsWanted) {
  const std::string decode = tool("tandem-decode") + " --checkpoint " + file("absent.h5");
  expect_one_line({decode + " --beam 0 < /dev/null",
                   "tandem-decode: error: --beam: 0 is not above 0; expected a positive number "
                   "(see --help)\n"});
  expect_one_line(
      {tool("tandem-prep") + " --train-src a --train-tgt b --out " + file("x.h5") + " --threads -1",
       "tandem-prep: error: --threads: -1 is negative; expected 0 or more (see "
       "--help)\n"});
  expect_one_line(
      {decode + " --batch-tokens many < /dev/null", "--batch-tokens: 'many' is not a number"});
}

// TANDEM_CPU_KERNELS: an unknown path, and a path this CPU cannot execute (where there is one),
// before anything is loaded or trained.
TEST_F(ToolErrors, EveryToolThatRunsKernelsNamesAForcedPathTheCpuLacks) {
  std::vector<std::string> values = {"avx3"};
  for (const auto path : {kernels::CpuPath::kAvx512Vnni, kernels::CpuPath::kAvx512,
                          kernels::CpuPath::kAvxVnni, kernels::CpuPath::kAvx2}) {
    if (!kernels::cpu_executes(path)) {
      values.push_back(kernels::cpu_path_name(path));
      break;
    }
  }
  for (const auto& value : values) {
    const std::string env = "TANDEM_CPU_KERNELS=" + value + " ";
    expect_one_line(
        {env + tool("tandem-decode") + " --checkpoint " + file("absent.h5") + " < /dev/null",
         "TANDEM_CPU_KERNELS=" + value});
    expect_one_line(
        {env + tool("tandem-eval") + " --checkpoint " + file("absent.h5") + " --split test",
         "TANDEM_CPU_KERNELS=" + value});
    expect_one_line({env + tool("tandem-train") + " --config " + file("no-corpus.yaml"),
                     "TANDEM_CPU_KERNELS=" + value});
  }
}

TEST_F(ToolErrors, PrepNamesTheMissingInputFile) {
  expect_one_line({tool("tandem-prep") + " --train-src " + file("absent.src") + " --train-tgt " +
                       file("absent.tgt") + " --out " + file("out.h5"),
                   file("absent.src")});
}

TEST_F(ToolErrors, AverageNamesTheMissingCheckpoint) {
  expect_one_line({tool("tandem-average") + " --out " + file("avg.h5") + " " + file("absent.h5"),
                   file("absent.h5")});
}

TEST_F(ToolErrors, ExportNamesTheMissingCheckpointAndTheUnknownFormat) {
  expect_one_line({tool("tandem-export") + " --checkpoint " + file("absent.h5") +
                       " --to ctranslate2 --out " + file("ct2"),
                   file("absent.h5")});
  expect_one_line({tool("tandem-export") + " --checkpoint " + file("absent.h5") +
                       " --to onnx --out " + file("ct2"),
                   "onnx"});
}

}  // namespace
}  // namespace tandem::test
