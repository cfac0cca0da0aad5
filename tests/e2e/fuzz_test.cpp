// A bounded fuzz test of what users hand the tools: random mutations of a valid YAML config, of a
// corpus file and of a checkpoint file (many positions each), and decode input with invalid
// UTF-8, NUL bytes and 100,000-character lines. Every case must end with exit 0 or 2 (an error
// then on one line), never a crash signal or a hang (each runs under `timeout`), and never leave a
// partly written output file. Seeded: the same cases on every run. Prints the case count and time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

constexpr int kCaseTimeoutS = 120;

// Byte-mutated corpora and checkpoints are parsed by libhdf5 itself, which loses blocks of its own
// on some damaged headers (launch/sanitizers/lsan.supp says where). Its frames have names for that
// suppression only in ASan's slow stack walk, which these cases ask for; other builds ignore it.
const std::string kHdf5ParserStacks =
    "env ASAN_OPTIONS=\"${ASAN_OPTIONS}:fast_unwind_on_malloc=0:malloc_context_size=12\" ";

// Cases per file kind: the CI's bound, times TANDEM_FUZZ_SCALE (a whole number) for longer runs.
int cases(int base) {
  const char* scale = std::getenv("TANDEM_FUZZ_SCALE");
  return base * std::max(1, scale != nullptr ? std::atoi(scale) : 1);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

size_t count_lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

// Random edits at random places: bytes overwritten (NUL and non-ASCII included), ranges deleted,
// bytes inserted, a line repeated, the end cut off.
std::string mutate_text(std::string text, std::mt19937& random, int edits) {
  std::uniform_int_distribution<int> kind(0, 4), byte(0, 255);
  for (int e = 0; e < edits && !text.empty(); ++e) {
    const size_t at = std::uniform_int_distribution<size_t>(0, text.size() - 1)(random);
    switch (kind(random)) {
      case 0:
        text[at] = static_cast<char>(byte(random));
        break;
      case 1:
        text.erase(at, std::uniform_int_distribution<size_t>(1, 12)(random));
        break;
      case 2:
        text.insert(at, 1, static_cast<char>(byte(random)));
        break;
      case 3: {
        const size_t begin = text.rfind('\n', at) == std::string::npos ? 0 : text.rfind('\n', at);
        const size_t end = text.find('\n', at);
        text.insert(end == std::string::npos ? text.size() : end, text.substr(begin, end - begin));
        break;
      }
      default:
        text.resize(at);
    }
  }
  return text;
}

// `bytes` with `positions` bytes overwritten at random offsets, sometimes also cut short.
std::string mutate_binary(std::string bytes, std::mt19937& random, int positions) {
  std::uniform_int_distribution<size_t> offset(0, bytes.size() - 1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int p = 0; p < positions; ++p) bytes[offset(random)] = static_cast<char>(byte(random));
  if (std::uniform_int_distribution<int>(0, 9)(random) == 0) bytes.resize(offset(random));
  return bytes;
}

class FuzzE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-fuzz");
    make_reverse_corpus(dir_->path());
    write_file(file("good.yaml"),
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64}\n"
               "data: {corpus: " +
                   file("corpus.h5") +
                   ", max_tokens: 256, seed: 3}\n"
                   "train: {max_steps: 2, lr: 0.003, seed: 5, threads: 1, schedule: constant}\n"
                   "checkpoint: {dir: " +
                   file("run") +
                   ", every_steps: 0}\n"
                   "valid: {every_steps: 0, metric: bleu}\n"
                   "log: {every_steps: 1}\n");
    const auto r = run_command(tool("tandem-train") + " --config " + file("good.yaml"));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    write_file(file("input.txt"), "w1 w2 w3\nw4 w5\n");
  }
  static void TearDownTestSuite() {
    std::cout << "[          ] fuzz: " << cases_ << " cases in " << seconds_ << " s\n";
    delete dir_;
  }
  static std::string file(const std::string& name) { return dir_->file(name); }

  // Runs a case: exit 0 or 2, one error line on 2, and `output` (when given) whole or absent.
  // Returns the exit code.
  static int run_case(const std::string& command, const std::string& what,
                      const std::string& output = "", size_t expected_lines = 0) {
    if (!output.empty()) fs::remove(output);
    const auto started = std::chrono::steady_clock::now();
    // Grouped, so that run_command's 2>&1 takes the tool's stderr, not the file stdout goes to.
    const auto r =
        run_command("{ timeout -s KILL " + std::to_string(kCaseTimeoutS) + " " + command + "; }");
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ++cases_;
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2) << what << ": exit " << r.exit_code << "\n"
                                                      << r.output.substr(0, 3000);
    if (r.exit_code == 2) {
      size_t errors = 0;
      std::istringstream lines(r.output);
      for (std::string line; std::getline(lines, line);)
        errors += line.find("error") != std::string::npos;
      EXPECT_EQ(errors, 1u) << what << "\n" << r.output.substr(0, 3000);
    }
    if (!output.empty() && r.exit_code == 0) {
      EXPECT_EQ(count_lines(read_file(output)), expected_lines) << what;
    } else if (!output.empty()) {
      EXPECT_TRUE(!fs::exists(output) || fs::file_size(output) == 0) << what << ": partial output";
    }
    return r.exit_code;
  }

  static TempDir* dir_;
  static int cases_;
  static double seconds_;
};
TempDir* FuzzE2E::dir_ = nullptr;
int FuzzE2E::cases_ = 0;
double FuzzE2E::seconds_ = 0;

TEST_F(FuzzE2E, MutatedConfigsAreReadOrRefusedOnOneLine) {
  std::mt19937 random(1);
  const std::string good = read_file(file("good.yaml"));
  int refused = 0;
  for (int c = 0; c < cases(60); ++c) {
    write_bytes(file("mutated.yaml"), mutate_text(good, random, 1 + c % 6));
    const int code =
        run_case(tool("tandem-train") + " --config " + file("mutated.yaml") + " --print-config",
                 "config case " + std::to_string(c));
    refused += code == 2;
  }
  EXPECT_GT(refused, 20);  // the mutations do break configs
}

TEST_F(FuzzE2E, MutatedCorporaEvaluateOrAreRefusedOnOneLine) {
  std::mt19937 random(2);
  const std::string good = read_file(file("corpus.h5"));
  int refused = 0;
  for (int c = 0; c < cases(25); ++c) {
    write_bytes(file("mutated.h5"), mutate_binary(good, random, 4 << (c % 5)));
    refused += 2 == run_case(kHdf5ParserStacks + tool("tandem-eval") + " --checkpoint " +
                                 file("run/last.h5") + " --corpus " + file("mutated.h5") +
                                 " --split test --beam 1 --output " + file("hyp.txt"),
                             "corpus case " + std::to_string(c), file("hyp.txt"), 40);
  }
  EXPECT_GT(refused, 5);
}

TEST_F(FuzzE2E, MutatedCheckpointsDecodeOrAreRefusedOnOneLine) {
  std::mt19937 random(3);
  const std::string good = read_file(file("run/last.h5"));
  int refused = 0;
  for (int c = 0; c < cases(25); ++c) {
    write_bytes(file("mutated-ckpt.h5"), mutate_binary(good, random, 4 << (c % 5)));
    refused += 2 == run_case(kHdf5ParserStacks + tool("tandem-decode") + " --checkpoint " +
                                 file("mutated-ckpt.h5") + " < " + file("input.txt") + " > " +
                                 file("decoded.txt"),
                             "checkpoint case " + std::to_string(c), file("decoded.txt"), 2);
  }
  EXPECT_GT(refused, 5);
}

TEST_F(FuzzE2E, HostileDecodeInputIsTranslatedLineForLine) {
  const std::string long_line(100000, 'w');
  std::string words;
  for (int i = 0; i < 20000; ++i) words += "w" + std::to_string(i % 9) + " ";
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"invalid UTF-8", "w1 \xff\xfe w2\n\xc3\x28\n\xed\xa0\x80 w3\n"},
      {"NUL bytes", std::string("w1\0w2\n\0\n", 8)},
      {"a 100,000-character line", long_line + "\n"},
      {"100,000 characters of words", words + "\n"},
      {"empty lines and spaces", "\n   \n\t\n"},
      {"CRLF and no final newline", "w1 w2\r\nw3"},
      {"no input", ""},
  };
  for (const auto& [what, text] : inputs) {
    write_bytes(file("hostile.txt"), text);
    const size_t lines = count_lines(text) + (!text.empty() && text.back() != '\n' ? 1 : 0);
    EXPECT_EQ(run_case(tool("tandem-decode") + " --checkpoint " + file("run/last.h5") + " < " +
                           file("hostile.txt") + " > " + file("decoded.txt"),
                       what, file("decoded.txt"), lines),
              0)
        << what;
  }
}

}  // namespace
}  // namespace tandem::test
