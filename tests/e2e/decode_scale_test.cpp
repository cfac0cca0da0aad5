// Translating a file at scale through the real tools: tandem-decode --input/--output in chunks on
// one rank and on two (--ranks 2) writes the same bytes as the streaming tandem-decode of standard
// input with the same chunks, at beams 1 and 4, fp32 and int8, with n-best lists and with
// sampling (whose lines depend on the seed alone: not the ranks nor the chunk size); a rank killed
// with SIGKILL is relaunched, a rank frozen with SIGSTOP ends the job after --timeout-s and is
// relaunched, and a SIGTERM to the launcher stops the job: each time the job finishes in the same
// bytes with at most one chunk redone per rank; a second command beside a running job is refused;
// what cannot be done is exit 2 with one line and no output written. tandem-score's totals over the
// test split are minus tandem-eval's loss times its tokens, alone and as an ensemble, at one rank
// and two.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
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

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

class DecodeAtScale : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-decode-scale");
    SyntheticCorpusOptions options;
    options.train_pairs = 1500;
    make_reverse_corpus(dir_->path(), options);
    write_file(file("model.yaml"),
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, d_ff: 64, "
               "dropout: 0.1}\n"
               "data: {corpus: " +
                   file("corpus.h5") +
                   ", max_tokens: 512, seed: 3}\n"
                   "train: {max_steps: 160, lr: 0.003, clip_norm: 1.0, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   file("run") +
                   ", every_steps: 80, keep_last: 0}\n"
                   "valid: {every_steps: 0}\n"
                   "log: {every_steps: 40}\n");
    const auto trained =
        run_command(tool("tandem-train") + " --config " + file("model.yaml") + " --ranks 2");
    ASSERT_EQ(trained.exit_code, 0) << trained.output;
    // The test split's sources again and again, with an empty line, a line with a carriage
    // return and one far longer than any the model saw among them.
    const std::vector<std::string> test = lines_of(read_text(file("test.src")));
    std::string input;
    for (int copy = 0; copy < 15; ++copy) {
      for (const auto& line : test) input += line + "\n";
      if (copy == 3) input += "\n" + test[0] + "\r\n" + repeated(test[1], 12) + "\n";
    }
    write_file(file("input.txt"), input);
    std::string large;
    for (int copy = 0; copy < 100; ++copy) large += read_text(file("test.src"));
    write_file(file("large.txt"), large);
  }
  static void TearDownTestSuite() { delete dir_; }

  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string model() { return file("run/last.h5"); }
  static std::string repeated(const std::string& line, int times) {
    std::string out = line;
    for (int i = 1; i < times; ++i) out += " " + line;
    return out;
  }

  // tandem-decode with the model and `flags`.
  static std::string decode(const std::string& flags) {
    return tool("tandem-decode") + " --checkpoint " + model() + " " + flags;
  }
  // A file job's translation of input.txt into `output` with `flags`: its bytes.
  static std::string translated(const std::string& output, const std::string& flags) {
    const auto r = run_command(
        decode("--input " + file("input.txt") + " --output " + file(output) + " " + flags));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("tandem-decode: wrote " + file(output)), std::string::npos) << r.output;
    return read_text(file(output));
  }

  static TempDir* dir_;
};
TempDir* DecodeAtScale::dir_ = nullptr;

// How many chunks a resumed run said it redoes: "... N chunk(s) redone (in hand when it stopped".
int redone_in(const std::string& output) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(R"((\d+) chunk\(s\) redone \(in hand)"))) return -1;
  return std::stoi(m[1].str());
}

// The parts a running job has written so far.
int parts_in(const std::string& folder) {
  int parts = 0;
  std::error_code error;
  for (fs::directory_iterator it(folder, error), end; !error && it != end; it.increment(error)) {
    parts += it->path().extension() == ".part" ? 1 : 0;
  }
  return parts;
}

TEST_F(DecodeAtScale, TwoRanksWriteTheBytesOfOneAndOfTheStreamingDecode) {
  struct Case {
    std::string name, flags;
  };
  const std::vector<Case> cases = {{"beam4", "--beam 4"},
                                   {"greedy", "--beam 1"},
                                   {"int8", "--beam 4 --precision int8"},
                                   {"nbest", "--beam 4 --nbest 3"},
                                   {"sampled", "--sampling topk:5 --temperature 0.8 --seed 11"}};
  for (const auto& c : cases) {
    const std::string flags = c.flags + " --chunk-lines 50 --threads 1";
    const std::string one = translated(c.name + "-1.txt", flags);
    const std::string two = translated(c.name + "-2.txt", flags + " --ranks 2");
    const auto streamed = run_command(decode(flags + " < " + file("input.txt")));
    ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
    if (c.name != "nbest") {
      EXPECT_EQ(lines_of(one).size(), 603u) << c.name;
    }
    EXPECT_EQ(one, two) << c.name;
    EXPECT_EQ(one, streamed.output) << c.name;
  }
  // The n-best lists number the lines across chunks: the last is line 602.
  EXPECT_EQ(lines_of(read_text(file("nbest-2.txt"))).back().rfind("602 ||| ", 0), 0u);
}

TEST_F(DecodeAtScale, SampledLinesDependOnTheSeedAloneNotTheRanksOrTheChunks) {
  const std::string sampling = "--sampling topk:5 --seed 4 --threads 1";
  const std::string base = translated("s-50.txt", sampling + " --chunk-lines 50");
  EXPECT_EQ(translated("s-7.txt", sampling + " --chunk-lines 7 --ranks 2"), base);
  EXPECT_EQ(translated("s-1000.txt", sampling + " --chunk-lines 1000"), base);
  EXPECT_NE(translated("s-seed.txt", "--sampling topk:5 --seed 5 --chunk-lines 50"), base);
}

TEST_F(DecodeAtScale, ARankKilledMidRunIsRelaunchedAndTheJobEndsInTheSameBytes) {
  const std::string flags = " --beam 2 --chunk-lines 40 --threads 1";
  const auto reference = run_command(decode(flags + " < " + file("large.txt")));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::string output = file("killed.txt");
  BackgroundCommand job("exec " + decode("--input " + file("large.txt") + " --output " + output +
                                         flags + " --ranks 2 --max-restarts 1"));
  ASSERT_TRUE(job.wait_until([&] { return parts_in(output + ".parts") >= 3; })) << job.output();
  const int rank1 = job.rank_pid(1);
  ASSERT_GT(rank1, 0) << job.output();
  kill(rank1, SIGKILL);
  ASSERT_EQ(job.wait(), 0) << job.output();
  EXPECT_NE(job.output().find("tandem-decode: restart 1 of 1: rank 1"), std::string::npos)
      << job.output();
  const int redone = redone_in(job.output());
  EXPECT_GE(redone, 0) << job.output();
  EXPECT_LE(redone, 2) << job.output();  // one chunk per rank at most
  EXPECT_EQ(read_text(output), reference.output);
  EXPECT_FALSE(fs::exists(output + ".parts"));
  const auto record = nlohmann::json::parse(read_text(output + ".job.json"));
  EXPECT_EQ(record["summary"]["restarts"], 1);
  EXPECT_EQ(record["summary"]["redone"], redone);
}

// Rank 1 freezes itself (SIGSTOP) as it begins its fourth chunk: rank 0 goes on alone, ends the
// job once rank 1 has held that chunk for --timeout-s, and the relaunch finishes the file.
TEST_F(DecodeAtScale, ARankFrozenMidRunEndsTheJobAfterTheTimeoutAndTheRelaunchFinishesIt) {
  const std::string flags = " --beam 2 --chunk-lines 40 --threads 1";
  const auto reference = run_command(decode(flags + " < " + file("large.txt")));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::string output = file("frozen.txt");
  const auto job = run_command("TANDEM_FAULT_INJECT=rank=1,step=3,kind=sigstop,restart=0 " +
                               decode("--input " + file("large.txt") + " --output " + output +
                                      flags + " --ranks 2 --max-restarts 1 --timeout-s 5"));
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_TRUE(std::regex_search(
      job.output, std::regex(R"(rank 1 on \S+ has held chunk \d+ for \d+ s \(the limit: 5 s\): )"
                             R"(a peer is dead or stuck)")))
      << job.output;
  EXPECT_NE(job.output.find("tandem-decode: restart 1 of 1: "), std::string::npos) << job.output;
  // The frozen rank's chunk, and rank 0's if it was still at work when the job ended.
  EXPECT_GE(redone_in(job.output), 1) << job.output;
  EXPECT_LE(redone_in(job.output), 2) << job.output;
  EXPECT_EQ(read_text(output), reference.output);
}

TEST_F(DecodeAtScale, ASigtermToTheLauncherStopsTheJobAndTheSameCommandResumesIt) {
  const std::string flags = " --beam 2 --chunk-lines 40 --threads 1";
  const auto reference = run_command(decode(flags + " < " + file("large.txt")));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::string output = file("stopped.txt");
  const std::string command =
      decode("--input " + file("large.txt") + " --output " + output + flags + " --ranks 2");
  {
    BackgroundCommand job("exec " + command);
    ASSERT_TRUE(job.wait_until([&] { return parts_in(output + ".parts") >= 3; })) << job.output();
    job.signal(SIGTERM);
    EXPECT_EQ(job.wait(), 128 + SIGTERM) << job.output();
    EXPECT_NE(job.output().find("tandem-decode: SIGTERM: every rank finishes the chunk in hand and "
                                "rank 0 writes it; the same again from the same sender"),
              std::string::npos)
        << job.output();
    EXPECT_NE(job.output().find("tandem-decode: stopped by SIGTERM; "), std::string::npos)
        << job.output();
    EXPECT_NE(job.output().find("the same command resumes at the first unfinished chunk"),
              std::string::npos)
        << job.output();
  }
  EXPECT_FALSE(fs::exists(output));
  const int done = parts_in(output + ".parts");
  EXPECT_GE(done, 3);
  const auto resumed = run_command(command);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming " + output + ": " + std::to_string(done) + " of 100"),
            std::string::npos)
      << resumed.output;
  // A stop lets the ranks finish the chunks in hand: nothing is redone.
  EXPECT_EQ(redone_in(resumed.output), 0) << resumed.output;
  EXPECT_EQ(read_text(output), reference.output);
  // Run again, the finished job is left as it is.
  const auto again = run_command(command);
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find(output + " is complete"), std::string::npos) << again.output;
  EXPECT_EQ(read_text(output), reference.output);
}

// A second command on the output of a running file job is refused at once, exit 2 and one line
// naming it (the job's rank 0, held with SIGSTOP, still holds the output's lock), and changes
// nothing of it: the job ends in the bytes of the streaming decode.
TEST_F(DecodeAtScale, ASecondCommandBesideARunningFileJobIsRefusedAndTheJobEndsInItsBytes) {
  const std::string flags = " --beam 2 --chunk-lines 40 --threads 1";
  const auto reference = run_command(decode(flags + " < " + file("large.txt")));
  ASSERT_EQ(reference.exit_code, 0) << reference.output;
  const std::string output = file("beside.txt");
  const std::string command =
      decode("--input " + file("large.txt") + " --output " + output + flags + " --ranks 2");
  BackgroundCommand job("exec " + command);
  ASSERT_TRUE(job.wait_until([&] { return parts_in(output + ".parts") >= 1; })) << job.output();
  const int rank0 = job.rank_pid(0);
  ASSERT_GT(rank0, 0);
  ASSERT_EQ(kill(rank0, SIGSTOP), 0);
  const auto refused = run_command(command);
  ASSERT_EQ(kill(rank0, SIGCONT), 0);
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_EQ(lines_of(refused.output).size(), 1u) << refused.output;
  EXPECT_NE(refused.output.find("--output '" + output + "' is in use by another job (host "),
            std::string::npos)
      << refused.output;
  EXPECT_EQ(job.wait(), 0) << job.output();
  EXPECT_EQ(read_text(output), reference.output);
}

// Exit code 2, one line naming `named`, and neither the output nor its parts folder changed.
void expect_refused(const std::string& command, const std::string& named,
                    const std::string& output) {
  const bool had_output = fs::exists(output), had_parts = fs::exists(output + ".parts");
  const std::string before = had_output ? read_text(output) : "";
  const auto r = run_command(command);
  EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
  EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find(named), std::string::npos) << r.output;
  EXPECT_EQ(fs::exists(output), had_output) << r.output;
  EXPECT_EQ(fs::exists(output + ".parts"), had_parts) << r.output;
  if (had_output) {
    EXPECT_EQ(read_text(output), before);
  }
}

TEST_F(DecodeAtScale, WhatCannotBeDoneIsExitTwoWithOneLineAndNothingWritten) {
  const std::string output = file("refused.txt");
  const std::string io = " --input " + file("input.txt") + " --output " + output;
  for (const std::string launch : {"", " --ranks 2"}) {
    expect_refused(decode("--sampling topk:0" + io + launch), "topk:0", output);
    expect_refused(decode("--sampling topk:5 --beam 4" + io + launch), "--beam 1", output);
    expect_refused(decode("--input " + file("absent.txt") + " --output " + output + launch),
                   file("absent.txt"), output);
    expect_refused(decode("--input " + dir_->path() + " --output " + output + launch),
                   "is a folder", output);
  }
  // An output another command wrote, or a file no job wrote, is kept.
  ASSERT_EQ(translated("refused.txt", "--beam 1 --chunk-lines 100").empty(), false);
  expect_refused(decode("--beam 4 --chunk-lines 100" + io),
                 "exists from a different command: "
                 "--beam 4 (recorded: 1)",
                 output);
  expect_refused(decode("--beam 1 --chunk-lines 100" + io + " --ranks 2 --checkpoint " +
                        file("run/step-00000080.h5")),
                 "exists from a different command: 2 --checkpoint (recorded: 1)", output);
  write_file(file("mine.txt"), "my own notes\n");
  expect_refused(decode("--beam 1 --input " + file("input.txt") + " --output " + file("mine.txt")),
                 "exists and no " + file("mine.txt") + ".job.json says", file("mine.txt"));
  // A resume record whose input has changed since.
  const std::string moving = file("moving.txt");
  write_file(moving, read_text(file("large.txt")));
  const std::string resumable = file("resumable.txt");
  {
    BackgroundCommand job("exec " + decode("--input " + moving + " --output " + resumable +
                                           " --chunk-lines 40 --threads 1 --ranks 2"));
    ASSERT_TRUE(job.wait_until([&] { return parts_in(resumable + ".parts") >= 1; }))
        << job.output();
    job.signal(SIGTERM);
    job.wait();
  }
  write_file(moving, read_text(file("large.txt")) + "one more line\n");
  expect_refused(decode("--input " + moving + " --output " + resumable +
                        " --chunk-lines 40 --threads 1 --ranks 2"),
                 "the resume record '" + resumable +
                     ".parts/job.json' does not match this "
                     "command: the input '" +
                     moving + "' has other content",
                 resumable);
}

std::vector<std::string> split_words(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Whether `phrase` stands in `line` as whole words.
bool has_words(const std::string& line, const std::string& phrase) {
  return (" " + line + " ").find(" " + phrase + " ") != std::string::npos;
}

// Each test source as a JSON line: its reference's second word (or its last two words) to
// include, and its reference's first word, which the model writes unless kept from it, to avoid
// when it is not one of those. → the JSON lines, per line its phrases to include and to avoid.
struct JsonInput {
  std::string text;
  std::vector<std::vector<std::string>> include, avoid;
};
JsonInput json_input(const std::vector<std::string>& sources,
                     const std::vector<std::string>& refs) {
  JsonInput out;
  for (size_t i = 0; i < sources.size(); ++i) {
    const auto ref = split_words(refs[i]);
    out.include.push_back({i % 2 == 0 || ref.size() < 2 ? ref[ref.size() > 1 ? 1 : 0]
                                                        : ref[ref.size() - 2] + " " + ref.back()});
    out.avoid.emplace_back();
    if (!has_words(out.include.back().front(), ref.front())) out.avoid.back().push_back(ref[0]);
    nlohmann::json line = {{"text", sources[i]}, {"constraints", out.include.back()}};
    if (!out.avoid.back().empty()) line["avoid"] = out.avoid.back();
    out.text += line.dump() + "\n";
  }
  return out;
}

TEST_F(DecodeAtScale, JsonLinesConstraintsHoldInEveryTranslationAtAnyRankCountAndChunkSize) {
  const auto sources = lines_of(read_text(file("test.src")));
  const auto refs = lines_of(read_text(file("test.tgt")));
  const auto input = json_input(sources, refs);
  write_file(file("constrained.jsonl"), input.text);
  const std::string io = "--json-input --input " + file("constrained.jsonl") + " --threads 1";
  for (const std::string beam : {"1", "4", "8"}) {
    const std::string out = file("constrained-" + beam + ".txt");
    const auto one = run_command(decode(io + " --beam " + beam + " --chunk-lines 7 --output " + out));
    ASSERT_EQ(one.exit_code, 0) << one.output;
    const auto lines = lines_of(read_text(out));
    ASSERT_EQ(lines.size(), sources.size());
    int avoided = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      for (const auto& phrase : input.include[i]) {
        EXPECT_TRUE(has_words(lines[i], phrase)) << "beam " << beam << ", line " << i << ": "
                                                 << lines[i] << " lacks " << phrase;
      }
      for (const auto& phrase : input.avoid[i]) {
        EXPECT_FALSE(has_words(lines[i], phrase)) << "beam " << beam << ", line " << i;
        ++avoided;
      }
    }
    EXPECT_GT(avoided, 10) << "beam " << beam;
    if (beam != "4") continue;
    const auto two = run_command(decode(io + " --beam 4 --chunk-lines 50 --ranks 2 --output " +
                                        file("constrained-4-two.txt")));
    ASSERT_EQ(two.exit_code, 0) << two.output;
    EXPECT_EQ(read_text(file("constrained-4-two.txt")), read_text(out));
    const auto streamed = run_command(decode("--json-input --beam 4 --threads 1 < " +
                                             file("constrained.jsonl")));
    ASSERT_EQ(streamed.exit_code, 0) << streamed.output;
    EXPECT_EQ(streamed.output, read_text(out));
  }
}

TEST_F(DecodeAtScale, ABadJsonLineOrPhraseIsExitTwoNamingItsLineAndNothingIsWritten) {
  const auto sources = lines_of(read_text(file("test.src")));
  const std::string good = nlohmann::json({{"text", sources[0]}}).dump() + "\n";
  std::string bad_json, bad_phrase, unknown_key;
  for (int i = 0; i < 40; ++i) {
    bad_json += i == 36 ? "{\"text\": \"unclosed\n" : good;
    bad_phrase += i == 12 ? "{\"text\": \"a\", \"constraints\": [\"\\u2603\"]}\n" : good;
    unknown_key += i == 3 ? "{\"text\": \"a\", \"constraint\": [\"x\"]}\n" : good;
  }
  write_file(file("bad-json.jsonl"), bad_json);
  write_file(file("bad-phrase.jsonl"), bad_phrase);
  write_file(file("unknown-key.jsonl"), unknown_key);
  const std::string output = file("bad.txt");
  for (const std::string launch : {"", " --ranks 2"}) {
    for (const auto& [name, line] : std::vector<std::pair<std::string, std::string>>{
             {"bad-json.jsonl", "line 37: not JSON"},
             {"bad-phrase.jsonl", "line 13: constraints[0]"},
             {"unknown-key.jsonl", "line 4: unknown key \"constraint\""}}) {
      expect_refused(decode("--json-input --chunk-lines 5 --input " + file(name) + " --output " +
                            output + launch),
                     file(name) + ": " + line, output);
    }
  }
  // From standard input: the chunks before the bad line's are written, none of its own.
  const auto r = run_command("(" + decode("--json-input --beam 1 --chunk-lines 10 < " +
                                          file("bad-json.jsonl") + " > " + file("streamed.txt")) +
                             ")");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(lines_of(r.output).size(), 1u) << r.output;
  EXPECT_NE(r.output.find("line 37: not JSON"), std::string::npos) << r.output;
  EXPECT_EQ(lines_of(read_text(file("streamed.txt"))).size(), 30u);
}

TEST_F(DecodeAtScale, ProgressLinesAndTheSummaryCarryTheFigures) {
  const auto r =
      run_command(decode("--input " + file("large.txt") + " --output " + file("progress.txt") +
                         " --chunk-lines 400 --progress-s 0.001 --threads 1"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(tandem-decode: chunk 5/10 \| 2000/4000 lines \| [0-9.]+ lines/s \| )"
                           R"(\d+m\d\ds \| ETA \d+m\d\ds)")))
      << r.output;
  EXPECT_TRUE(std::regex_search(
      r.output, std::regex(R"(wrote .*progress.txt: 4000 lines in 10 chunks \(0 done before this )"
                           R"(run, 0 redone\), [0-9.]+ lines/s on 1 rank\(s\))")))
      << r.output;
}

// Column `column` of a tandem-score output, summed.
double column_sum(const std::string& scores, size_t column) {
  double sum = 0;
  for (const auto& line : lines_of(scores)) {
    std::istringstream fields(line);
    std::string field;
    for (size_t i = 0; i <= column; ++i) std::getline(fields, field, '\t');
    sum += std::stod(field);
  }
  return sum;
}

TEST_F(DecodeAtScale, ScoresSumToMinusTheLossTimesTheTokensOfTandemEval) {
  const std::string pairs = " --src " + file("test.src") + " --tgt " + file("test.tgt");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"single", " --checkpoint " + model()},
      {"ensemble", " --checkpoint " + model() + " --checkpoint " + file("run/step-00000080.h5")}};
  for (const auto& [name, models] : cases) {
    const auto eval = run_command(tool("tandem-eval") + models + " --src " + file("test.src") +
                                  " --ref " + file("test.tgt") + " --beam 1 --json");
    ASSERT_EQ(eval.exit_code, 0) << eval.output;
    const auto record = nlohmann::json::parse(lines_of(eval.output).back());
    const double expected = -record["loss"].get<double>() * record["tokens"].get<double>();
    const auto alone = run_command(tool("tandem-score") + models + pairs + " --chunk-lines 7");
    ASSERT_EQ(alone.exit_code, 0) << alone.output;
    const auto lines = lines_of(alone.output);
    ASSERT_EQ(lines.size(), 40u);
    EXPECT_NEAR(column_sum(alone.output, 0), expected, 1e-5 * std::abs(expected)) << models;
    EXPECT_EQ(column_sum(alone.output, 1), record["tokens"].get<double>());
    const std::string output = file(name + ".scores");
    const auto ranked = run_command(tool("tandem-score") + models + pairs + " --chunk-lines 7" +
                                    " --output " + output + " --ranks 2 --threads 1");
    ASSERT_EQ(ranked.exit_code, 0) << ranked.output;
    EXPECT_EQ(read_text(output), alone.output);
    // Per token and normalised, from the total and the count (lenpen 0.6).
    std::istringstream first(lines.front());
    double total = 0, tokens = 0, per_token = 0, normalized = 0;
    first >> total >> tokens >> per_token >> normalized;
    EXPECT_NEAR(per_token, total / tokens, 1e-6);
    EXPECT_NEAR(normalized, total / std::pow(tokens, 0.6), 1e-6);
  }
}

}  // namespace
}  // namespace tandem::test
