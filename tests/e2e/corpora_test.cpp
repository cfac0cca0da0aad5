// Training on several corpora in one file (tandem-prep --corpora) with sampling across them
// (data.temperature, data.weights): the plan is a function of the seed and the step, so 2 ranks
// equal 1 rank with 2 accumulation steps, a stop and resume equal an uninterrupted run, and so
// does a restart after a killed rank, bit for bit; bad weights and temperatures are exit 2 naming
// the corpus and the value.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/run_command.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

// Two directions of the reversal corpus, 400 and 40 pairs: "fw" (a → b) and "bw" (b → a).
class CorporaE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-corpora");
    make_reverse_corpus(dir_->path());
    const auto head = run_command("cd " + dir_->path() +
                                  " && head -n 40 train.tgt > bw.src && head -n 40 train.src > "
                                  "bw.tgt && head -n 10 valid.tgt > bwv.src && head -n 10 "
                                  "valid.src > bwv.tgt");
    ASSERT_EQ(head.exit_code, 0) << head.output;
    write_file(dir_->file("corpora.yaml"),
               "corpora:\n"
               "  - {name: fw, src_lang: a, tgt_lang: b, train: {src: train.src, tgt: train.tgt},\n"
               "     valid: {src: valid.src, tgt: valid.tgt}}\n"
               "  - {name: bw, src_lang: b, tgt_lang: a, train: {src: bw.src, tgt: bw.tgt},\n"
               "     valid: {src: bwv.src, tgt: bwv.tgt}}\n");
    const auto prep = run_command(tool("tandem-prep") + " --corpora " + dir_->file("corpora.yaml") +
                                  " --vocab-size 64 --out " + dir_->file("corpora.h5"));
    ASSERT_EQ(prep.exit_code, 0) << prep.output;
    prep_output_ = new std::string(prep.output);
  }
  static void TearDownTestSuite() {
    delete prep_output_;
    delete dir_;
  }

  // 12 steps of a small model (dropout on unless `dropout` is "0") on the two corpora at
  // temperature 5, a checkpoint every 4, into run-<run>.
  static std::string train(const std::string& run, const std::string& dropout = "0.1") {
    const std::string path = dir_->file(run + ".yaml");
    write_file(path,
               "model: {d_model: 32, heads: 2, encoder_layers: 1, decoder_layers: 1, "
               "d_ff: 64, dropout: " +
                   dropout + "}\ndata: {corpus: " + dir_->file("corpora.h5") +
                   ", max_tokens: 128, seed: 3, temperature: 5}\n"
                   "train: {max_steps: 12, lr: 0.003, seed: 5, threads: 1}\n"
                   "checkpoint: {dir: " +
                   dir_->file("run-" + run) +
                   ", every_steps: 4, keep_last: 0}\n"
                   "log: {every_steps: 1}\n");
    return tool("tandem-train") + " --config " + path;
  }
  static checkpoint::CheckpointData last(const std::string& run) {
    return checkpoint::load(dir_->file("run-" + run + "/last.h5"));
  }
  static void expect_same(const checkpoint::CheckpointData& a,
                          const checkpoint::CheckpointData& b) {
    ASSERT_EQ(a.step, b.step);
    EXPECT_EQ(a.data_epoch, b.data_epoch);
    EXPECT_EQ(a.data_next_batch, b.data_next_batch);
    ASSERT_EQ(a.model.size(), b.model.size());
    for (size_t i = 0; i < a.model.size(); ++i) {
      EXPECT_TRUE(torch::equal(a.model[i].second, b.model[i].second)) << a.model[i].first;
    }
  }

  static TempDir* dir_;
  static std::string* prep_output_;
};
TempDir* CorporaE2E::dir_ = nullptr;
std::string* CorporaE2E::prep_output_ = nullptr;

TEST_F(CorporaE2E, PrepTagsBothDirectionsAndTrainingSaysWhatAnEpochDraws) {
  EXPECT_NE(prep_output_->find(">>b<< 4, >>a<< 5"), std::string::npos) << *prep_output_;
  EXPECT_NE(prep_output_->find("bw train"), std::string::npos) << *prep_output_;
  const auto r = run_command(train("banner") + " --set train.max_steps=1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Temperature 5 takes fewer of fw's 400 pairs and repeats bw's 40.
  EXPECT_NE(r.output.find("an epoch draws fw "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" of its 400 pairs, bw "), std::string::npos) << r.output;
}

TEST_F(CorporaE2E, TwoRanksEqualOneRankWithTwoAccumulationSteps) {
  const auto two = run_command(train("two-ranks", "0") + " --ranks 2");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto one = run_command(train("accumulated", "0") + " --set train.accum_steps=2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  expect_same(last("two-ranks"), last("accumulated"));
}

TEST_F(CorporaE2E, StopAndResumeAndARestartAfterAKilledRankEqualAnUninterruptedRun) {
  const auto straight = run_command(train("straight") + " --ranks 2");
  ASSERT_EQ(straight.exit_code, 0) << straight.output;
  const auto first = run_command(train("resumed") + " --ranks 2 --set train.max_steps=5");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const auto second = run_command(train("resumed") + " --ranks 2");
  ASSERT_EQ(second.exit_code, 0) << second.output;
  EXPECT_NE(second.output.find("at step 5"), std::string::npos) << second.output;
  expect_same(last("resumed"), last("straight"));

  const auto restarted = run_command("TANDEM_FAULT_INJECT=rank=1,step=7,kind=sigkill,restart=0 " +
                                     train("restarted") + " --ranks 2 --max-restarts 1");
  ASSERT_EQ(restarted.exit_code, 0) << restarted.output;
  EXPECT_NE(restarted.output.find("restart 1 of 1"), std::string::npos) << restarted.output;
  EXPECT_NE(restarted.output.find("resuming from step 4"), std::string::npos) << restarted.output;
  expect_same(last("restarted"), last("straight"));
}

// --target-lang puts the language's tag before each line: the same as typing it, and another
// language's tag gives another translation (here, at least other scores: the model is small).
TEST_F(CorporaE2E, TargetLangChoosesTheDirectionAsATypedTagDoes) {
  const auto r = run_command(train("decode") + " --set train.max_steps=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string decode = tool("tandem-decode") + " --checkpoint " +
                             dir_->file("run-decode/last.h5") + " --beam 2 --nbest 1";
  write_file(dir_->file("plain.txt"), "red green blue\nstone river\n");
  write_file(dir_->file("tagged-a.txt"), ">>a<< red green blue\n>>a<< stone river\n");
  const auto into_a = run_command(decode + " --target-lang a < " + dir_->file("plain.txt"));
  const auto into_b = run_command(decode + " --target-lang b < " + dir_->file("plain.txt"));
  const auto typed = run_command(decode + " < " + dir_->file("tagged-a.txt"));
  const auto typed_wins = run_command(decode + " --target-lang b < " + dir_->file("tagged-a.txt"));
  for (const auto* run : {&into_a, &into_b, &typed, &typed_wins}) {
    ASSERT_EQ(run->exit_code, 0) << run->output;
  }
  EXPECT_EQ(into_a.output, typed.output);
  EXPECT_EQ(typed_wins.output, typed.output);  // a line's own tag is kept
  EXPECT_NE(into_a.output, into_b.output);
  const auto unknown = run_command(decode + " --target-lang fr < " + dir_->file("plain.txt"));
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("--target-lang 'fr': not a language of the model (its target "
                                "languages: b, a)"),
            std::string::npos)
      << unknown.output;
}

// tandem-eval on the valid split scores each direction and their mean; a direction's BLEU is
// that of its lines of the translations alone (scored by tandem-eval --hyp --ref), and
// --corpus-name evaluates that direction only, with the same figures.
TEST_F(CorporaE2E, EvalScoresEachDirectionAndTheirMean) {
  const auto r = run_command(train("eval") + " --set train.max_steps=4");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string eval = tool("tandem-eval") + " --checkpoint " + dir_->file("run-eval/last.h5") +
                           " --split valid --beam 1 --json";
  const auto all = run_command(eval + " --output " + dir_->file("eval-all.txt"));
  ASSERT_EQ(all.exit_code, 0) << all.output;
  const auto json = nlohmann::json::parse(all.output.substr(all.output.rfind("\n{") + 1));
  ASSERT_EQ(json["corpora"].size(), 2u) << all.output;
  EXPECT_EQ(json["corpora"]["fw"]["sentences"], 40);
  EXPECT_EQ(json["corpora"]["bw"]["sentences"], 10);
  const double fw = json["corpora"]["fw"]["bleu"], bw = json["corpora"]["bw"]["bleu"];
  EXPECT_DOUBLE_EQ(json["mean_bleu"].get<double>(), (fw + bw) / 2);
  EXPECT_NE(all.output.find("mean of 2 directions: BLEU"), std::string::npos) << all.output;

  // fw's 40 lines of the translations against valid.tgt's first 40 lines, scored alone.
  const auto cut =
      run_command("head -n 40 " + dir_->file("eval-all.txt") + " > " + dir_->file("fw-hyp.txt") +
                  " && head -n 40 " + dir_->file("valid.tgt") + " > " + dir_->file("fw-ref.txt"));
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  const auto alone = run_command(tool("tandem-eval") + " --hyp " + dir_->file("fw-hyp.txt") +
                                 " --ref " + dir_->file("fw-ref.txt") + " --json");
  ASSERT_EQ(alone.exit_code, 0) << alone.output;
  const auto scored = nlohmann::json::parse(alone.output.substr(alone.output.rfind("\n{") + 1));
  EXPECT_DOUBLE_EQ(scored["bleu"].get<double>(), fw);
  EXPECT_DOUBLE_EQ(scored["chrf"].get<double>(), json["corpora"]["fw"]["chrf"].get<double>());

  const auto one = run_command(eval + " --corpus-name bw");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto only = nlohmann::json::parse(one.output.substr(one.output.rfind("\n{") + 1));
  EXPECT_EQ(only["sentences"], 10);
  EXPECT_DOUBLE_EQ(only["bleu"].get<double>(), bw);
  EXPECT_DOUBLE_EQ(only["loss"].get<double>(), json["corpora"]["bw"]["loss"].get<double>());
  const auto unknown = run_command(eval + " --corpus-name xx");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("--corpus-name 'xx' in '" + dir_->file("corpora.h5") +
                                "': no such corpus with a valid split (its corpora: fw, bw)"),
            std::string::npos)
      << unknown.output;
}

// Validation during training: the whole valid split's figures, then each direction's and their
// mean, in the log and in metrics.jsonl; a direction's BLEU equals tandem-eval's on the same
// checkpoint. valid.max_sentences caps each direction; valid.metric follows one of them. A corpus
// without a valid split is refused. Training reports each direction's loss, over both ranks.
TEST_F(CorporaE2E, ValidationScoresEachDirection) {
  const auto r = run_command(train("valid", "0") +
                             " --ranks 2 --set train.max_steps=4 --set valid.every_steps=4"
                             " --set valid.metric=bw_loss");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("| best bw_loss at step 4"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" | by corpus: fw "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  fw: loss "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" | 40 sentences"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find(" | 10 sentences"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  mean of 2 directions: BLEU "), std::string::npos) << r.output;
  nlohmann::json valid;
  std::istringstream lines(read_text(dir_->file("run-valid/metrics.jsonl")));
  int progress_records = 0;
  for (std::string line; std::getline(lines, line);) {
    const auto record = nlohmann::json::parse(line);
    if (record.contains("valid_bleu")) valid = record;
    if (!record.contains("loss")) continue;
    // The directions' losses, weighted by their target tokens, make the whole loss.
    ++progress_records;
    const double fw_tokens = record.at("tgt_tokens_fw"), bw_tokens = record.at("tgt_tokens_bw");
    const double fw_loss = record.at("loss_fw"), bw_loss = record.at("loss_bw");
    EXPECT_GT(fw_tokens, 0.0);
    EXPECT_NEAR((fw_loss * fw_tokens + bw_loss * bw_tokens) / (fw_tokens + bw_tokens),
                record.at("loss").get<double>(), 1e-6)
        << line;
    EXPECT_LE(record.at("accuracy_bw").get<double>(), 1.0) << line;
  }
  EXPECT_EQ(progress_records, 4);
  ASSERT_TRUE(valid.contains("valid_fw_bleu")) << valid.dump();
  const double fw = valid["valid_fw_bleu"], bw = valid["valid_bw_bleu"];
  EXPECT_DOUBLE_EQ(valid["valid_mean_bleu"].get<double>(), (fw + bw) / 2);
  EXPECT_TRUE(valid.contains("valid_bw_loss")) << valid.dump();
  const auto eval = run_command(tool("tandem-eval") + " --checkpoint " +
                                dir_->file("run-valid/last.h5") + " --split valid --beam 1 --json");
  ASSERT_EQ(eval.exit_code, 0) << eval.output;
  const auto scored = nlohmann::json::parse(eval.output.substr(eval.output.rfind("\n{") + 1));
  EXPECT_DOUBLE_EQ(scored["corpora"]["fw"]["bleu"].get<double>(), fw);
  EXPECT_DOUBLE_EQ(scored["corpora"]["bw"]["bleu"].get<double>(), bw);
  EXPECT_NEAR(scored["corpora"]["bw"]["loss"].get<double>(), valid["valid_bw_loss"].get<double>(),
              1e-4);

  const auto capped = run_command(train("capped", "0") +
                                  " --set train.max_steps=2 --set valid.every_steps=2 "
                                  "--set valid.max_sentences=5");
  ASSERT_EQ(capped.exit_code, 0) << capped.output;
  EXPECT_NE(capped.output.find("| 10 sentences in"), std::string::npos) << capped.output;
  EXPECT_EQ(capped.output.find(" | 40 sentences"), std::string::npos) << capped.output;

  write_file(dir_->file("no-valid.yaml"),
             "corpora:\n"
             "  - {name: fw, src_lang: a, tgt_lang: b, train: {src: train.src, tgt: train.tgt},\n"
             "     valid: {src: valid.src, tgt: valid.tgt}}\n"
             "  - {name: bw, src_lang: b, tgt_lang: a, train: {src: bw.src, tgt: bw.tgt}}\n");
  const auto prep = run_command(tool("tandem-prep") + " --corpora " + dir_->file("no-valid.yaml") +
                                " --vocab-size 64 --out " + dir_->file("no-valid.h5"));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const auto refused =
      run_command(train("no-valid") + " --set data.corpus=" + dir_->file("no-valid.h5") +
                  " --set valid.every_steps=2");
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_NE(refused.output.find("valid.every_steps is 2 but corpus 'bw' of '" +
                                dir_->file("no-valid.h5") + "' has no valid split"),
            std::string::npos)
      << refused.output;
}

TEST_F(CorporaE2E, BadWeightsTemperaturesAndMetricsAreUsageErrorsNamingTheValue) {
  const std::string base = train("bad");
  const auto unknown =
      run_command(base + " --set data.temperature=1 --set 'data.weights=fw:1,xx:2'");
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_NE(unknown.output.find("data.weights: no corpus 'xx' in '" + dir_->file("corpora.h5") +
                                "' (its corpora: fw, bw)"),
            std::string::npos)
      << unknown.output;
  const auto missing = run_command(base + " --set data.temperature=1 --set data.weights=fw:1");
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_NE(missing.output.find("data.weights: corpus 'bw' has no weight"), std::string::npos)
      << missing.output;
  const auto negative =
      run_command(base + " --set data.temperature=1 --set 'data.weights=fw:1,bw:-2'");
  EXPECT_EQ(negative.exit_code, 2) << negative.output;
  EXPECT_NE(negative.output.find("data.weights: 'bw:-2': the weight is not a positive number"),
            std::string::npos)
      << negative.output;
  const auto metric = run_command(base + " --set valid.every_steps=2 --set valid.metric=xx_bleu");
  EXPECT_EQ(metric.exit_code, 2) << metric.output;
  EXPECT_NE(metric.output.find("valid.metric: 'xx_bleu': no corpus 'xx' in '" +
                               dir_->file("corpora.h5") + "' (its corpora: fw, bw)"),
            std::string::npos)
      << metric.output;
  const auto zero = run_command(base + " --set data.temperature=0");
  EXPECT_EQ(zero.exit_code, 2) << zero.output;
  EXPECT_NE(zero.output.find("data.temperature"), std::string::npos) << zero.output;
  EXPECT_FALSE(std::filesystem::exists(dir_->file("run-bad/last.h5")));
}

}  // namespace
}  // namespace tandem::test
