// Word alignments for tandem-prep, made the way a user makes them: launch/align.sh (eflomal, both
// directions, grow-diag-final-and) on the reversal corpus, whose right alignment is known (target
// word j is source word n-1-j), then tandem-prep --train-align over it; and tandem-prep's refusals
// of alignments that do not fit their text (exit 2, one line naming file and line, nothing
// written). Training with guided alignment (train.alignment) on the known alignment: 2 ranks equal
// 1 rank accumulating 2 batches bitwise, with activation checkpointing and with the optimizer
// state and gradients sharded too, also for LoRA adapters; a run stopped and resumed equals the
// uninterrupted one; the alignment loss is logged; and its refusals (exit 2).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/synthetic_corpus.h"
#include "tests/e2e/checkpoint_checks.h"
#include "tests/e2e/run_command.h"
#include "tests/e2e/small_runs.h"
#include "trainer/checkpoint/checkpoint.h"

namespace tandem::test {
namespace {

class AlignE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("e2e-align");
    make_reverse_corpus(dir_->path());
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string file(const std::string& name) { return dir_->file(name); }
  static std::string prep(const std::string& align, const std::string& out) {
    return tool("tandem-prep") + " --train-src " + file("train.src") + " --train-tgt " +
           file("train.tgt") + " --train-align " + align + " --vocab-size 64 --out " + out;
  }

  static TempDir* dir_;
};
TempDir* AlignE2E::dir_ = nullptr;

TEST_F(AlignE2E, AlignShFindsTheReversalAndPrepMapsItToPieces) {
  const auto align =
      run_command(std::string(TANDEM_LAUNCH_DIR) + "/align.sh " + file("train.src") + " " +
                  file("train.tgt") + " " + file("train.align") + " " + file("test.src") + " " +
                  file("test.tgt") + " " + file("test.align"));
  if (align.exit_code != 0 && align.output.find("pip install") != std::string::npos) {
    GTEST_SKIP() << "eflomal cannot be installed here (launch/eflomal.sh): " << align.output;
  }
  ASSERT_EQ(align.exit_code, 0) << align.output;
  for (const std::string split : {"train", "test"}) {
    const auto src = lines_of(read_text(file(split + ".src")));
    const auto links = lines_of(read_text(file(split + ".align")));
    ASSERT_EQ(links.size(), src.size()) << split;
    size_t right = 0, total = 0;
    for (size_t k = 0; k < src.size(); ++k) {
      const size_t n = words_in(src[k]);
      std::istringstream in(links[k]);
      for (std::string link; in >> link; ++total) {
        const size_t dash = link.find('-');
        ASSERT_NE(dash, std::string::npos) << link;
        right += std::stoul(link.substr(0, dash)) == n - 1 - std::stoul(link.substr(dash + 1));
      }
    }
    // Repeated words make some links ambiguous; nearly all are the reversal.
    EXPECT_GE(right, total * 9 / 10) << split << ": " << right << " of " << total;
    EXPECT_GE(total, src.size()) << split;
  }
  const auto prep = run_command(this->prep(file("train.align"), file("aligned.h5")));
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  EXPECT_NE(prep.output.find("alignments: train: 400 of 400 kept pairs with links"),
            std::string::npos)
      << prep.output;
}

TEST_F(AlignE2E, AlignmentsThatDoNotFitTheTextAreOneLineExit2AndNothingIsWritten) {
  std::vector<std::string> lines(400, "0-0");
  std::string text;
  for (const std::string& line : lines) text += line + "\n";
  write_file(file("short.align"), text.substr(0, text.size() - 4));  // 399 lines
  lines[9] = "0-0 0-8";  // past every line's words (8 at most)
  text.clear();
  for (const std::string& line : lines) text += line + "\n";
  write_file(file("past.align"), text);
  const auto short_run = run_command(prep(file("short.align"), file("short.h5")));
  EXPECT_EQ(short_run.exit_code, 2);
  EXPECT_EQ(short_run.output, "tandem-prep: error: train split: '" + file("short.align") +
                                  "' has 399 alignment lines but '" + file("train.src") +
                                  "' has 400 lines; expected one alignment line per sentence "
                                  "pair\n");
  const auto past = run_command(prep(file("past.align"), file("past.h5")));
  EXPECT_EQ(past.exit_code, 2);
  EXPECT_EQ(lines_of(past.output).size(), 1u) << past.output;
  EXPECT_EQ(past.output.rfind("tandem-prep: error: line 10 of '" + file("past.align") +
                                  "' (train alignments): link '0-8': target word 8 is past the "
                                  "line's ",
                              0),
            0u)
      << past.output;
  for (const char* name : {"short.h5", "short.h5.tmp", "past.h5", "past.h5.tmp"}) {
    EXPECT_FALSE(std::filesystem::exists(file(name))) << name;
  }
}

class GuidedAlignmentE2E : public AlignE2E {
 protected:
  static void SetUpTestSuite() {
    AlignE2E::SetUpTestSuite();
    write_file(file("right.align"), reversal_alignment(file("train.src")));
    const auto prep = run_command(AlignE2E::prep(file("right.align"), file("guided.h5")));
    ASSERT_EQ(prep.exit_code, 0) << prep.output;
  }
  static std::string run_dir(const std::string& run) { return file("run-" + run); }

  // The tiny preset, narrowed, on `ranks` ranks into run-<run> up to step `steps`, the second
  // decoder layer's first two heads learning the alignment; `flags` add --set's.
  static CommandResult train(const std::string& run, int ranks, int steps,
                             const std::string& flags = "",
                             const std::string& corpus = "guided.h5") {
    return run_command(
        mpirun(ranks) + tool("tandem-train") + " --config " + std::string(TANDEM_SOURCE_DIR) +
        "/configs/tiny.yaml --set data.corpus=" + file(corpus) +
        " --set checkpoint.dir=" + run_dir(run) + " --set train.max_steps=" +
        std::to_string(steps) +
        " --set train.max_minutes=0 --set model.dropout=0 --set model.d_model=64"
        " --set model.d_ff=128 --set data.max_tokens=512 --set train.warmup_steps=5"
        " --set checkpoint.every_steps=6 --set checkpoint.keep_last=0 --set valid.every_steps=0"
        " --set log.every_steps=1 --set train.alignment.weight=0.5"
        " --set train.alignment.layer=-2 --set train.alignment.heads=2 " +
        flags);
  }
};

TEST_F(GuidedAlignmentE2E, TwoRanksEqualOneAccumulatingTwoWithRecomputeShardingAndResume) {
  const auto two = train("two", 2, 12);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_NE(two.output.find(" | align "), std::string::npos) << two.output;
  const std::vector<std::pair<std::string, CommandResult>> runs = {
      {"accumulating", train("accumulating", 1, 12, "--set train.accum_steps=2")},
      {"recomputed", train("recomputed", 1, 12,
                           "--set train.accum_steps=2 --set train.checkpoint_activations=true")},
      {"sharded", train("sharded", 2, 12,
                        "--set dist.shard_optimizer=true --set dist.shard_gradients=true")},
      {"resumed", train("resumed", 2, 6)}};
  for (const auto& [run, result] : runs) ASSERT_EQ(result.exit_code, 0) << run << result.output;
  const auto resumed = train("resumed", 2, 12);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("resuming from"), std::string::npos) << resumed.output;
  for (const std::string run : {"accumulating", "recomputed", "sharded", "resumed"}) {
    SCOPED_TRACE(run);
    expect_same_checkpoint(run_dir("two"), run_dir(run), "step-00000012.h5");
  }
  // The alignment loss is logged each step (TensorBoard's train/alignment_loss).
  const auto records = training_records(run_dir("two") + "/metrics.jsonl");
  ASSERT_EQ(records.size(), 12u);
  for (const auto& record : records) {
    ASSERT_TRUE(record.contains("alignment_loss")) << record.dump();
    EXPECT_GT(record["alignment_loss"].get<double>(), 0) << record.dump();
  }
  // Without it the same run trains other weights, and logs no alignment loss.
  const auto unguided = train("unguided", 2, 6, "--set train.alignment.weight=0");
  ASSERT_EQ(unguided.exit_code, 0) << unguided.output;
  const auto a = checkpoint::load(run_dir("two") + "/step-00000006.h5");
  const auto b = checkpoint::load(run_dir("unguided") + "/step-00000006.h5");
  EXPECT_FALSE(torch::equal(a.model.front().second, b.model.front().second));
  EXPECT_FALSE(training_records(run_dir("unguided") + "/metrics.jsonl")
                   .back()
                   .contains("alignment_loss"));
}

TEST_F(GuidedAlignmentE2E, LoraAdaptersLearnTheAlignmentOnTwoRanksAsOnOneAccumulatingTwo) {
  const auto base = train("lora-base", 1, 6, "--set train.alignment.weight=0");
  ASSERT_EQ(base.exit_code, 0) << base.output;
  const std::string lora = "--set lora.base=" + run_dir("lora-base") +
                           "/step-00000006.h5 --set lora.targets=q_proj,k_proj,v_proj";
  const auto two = train("lora-two", 2, 12, lora);
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto one = train("lora-one", 1, 12, lora + " --set train.accum_steps=2");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  expect_same_checkpoint(run_dir("lora-two"), run_dir("lora-one"), "step-00000012.h5");
  const auto records = training_records(run_dir("lora-two") + "/metrics.jsonl");
  ASSERT_FALSE(records.empty());
  EXPECT_TRUE(records.back().contains("alignment_loss"));
}

// tandem-decode --alignments: each line is the translation without the flag, a tab and links
// between words the lines have; n-best entries carry theirs as a fourth field; tandem-score
// --alignments of the translations (forced alignment) gives the same links; a file job writes
// what standard output gets.
TEST_F(GuidedAlignmentE2E, DecodeAndScoreWriteEachLinesWordAlignment) {
  const auto trained = train("decoding", 1, 12);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string checkpoint = run_dir("decoding") + "/last.h5";
  const std::string decode = tool("tandem-decode") + " --checkpoint " + checkpoint + " --beam 1";
  const std::string src = file("test.src");
  const auto plain = run_command(decode + " < " + src);
  const auto aligned = run_command(decode + " --alignments < " + src);
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  ASSERT_EQ(aligned.exit_code, 0) << aligned.output;
  const auto sources = lines_of(read_text(src));
  const auto translations = lines_of(plain.output);
  const auto lines = lines_of(aligned.output);
  ASSERT_EQ(lines.size(), sources.size());
  std::string hypotheses, alignments;
  size_t linked = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const size_t tab = lines[i].find('\t');
    ASSERT_NE(tab, std::string::npos) << lines[i];
    EXPECT_EQ(lines[i].substr(0, tab), translations[i]);
    for (const auto& [s, t] : links_of(lines[i].substr(tab + 1))) {
      EXPECT_LT(s, words_in(sources[i])) << lines[i];
      EXPECT_LT(t, words_in(translations[i])) << lines[i];
      ++linked;
    }
    hypotheses += translations[i] + "\n";
    alignments += lines[i].substr(tab + 1) + "\n";
  }
  EXPECT_GT(linked, lines.size());
  write_file(file("hyp.tgt"), hypotheses);
  const auto forced = run_command(tool("tandem-score") + " --checkpoint " + checkpoint +
                                  " --src " + src + " --tgt " + file("hyp.tgt") +
                                  " --alignments | cut -f5");
  ASSERT_EQ(forced.exit_code, 0) << forced.output;
  // The preset's guided heads learn each piece where it is the decoder's input (shifted): the
  // forced pass reads the last piece where it predicts EOS, which a translation cut at the length
  // limit (most of this 12-step model's) never reached. So the forced links are the decoded ones
  // and, on such lines, the last word's links from its last piece.
  const auto forced_lines = lines_of(forced.output), decoded_lines = lines_of(alignments);
  ASSERT_EQ(forced_lines.size(), decoded_lines.size());
  for (size_t i = 0; i < forced_lines.size(); ++i) {
    const auto decoded_links = links_of(decoded_lines[i]), forced_links = links_of(forced_lines[i]);
    const auto in = [](const auto& links, const auto& link) {
      return std::find(links.begin(), links.end(), link) != links.end();
    };
    for (const auto& link : decoded_links) EXPECT_TRUE(in(forced_links, link)) << "line " << i;
    size_t extra = 0;
    for (const auto& link : forced_links) {
      if (in(decoded_links, link)) continue;
      EXPECT_EQ(link.second + 1, words_in(translations[i])) << "line " << i << ": a word not last";
      ++extra;
    }
    EXPECT_LE(extra, 1u) << "line " << i << ": one piece gives one link";
  }
  // Read where each piece is predicted instead, the two agree exactly, on links of their own.
  const auto predicted =
      run_command(decode + " --alignments --alignment-shift=false < " + src + " | cut -f2");
  const auto forced_predicted =
      run_command(tool("tandem-score") + " --checkpoint " + checkpoint + " --src " + src +
                  " --tgt " + file("hyp.tgt") + " --alignments --alignment-shift=false | cut -f5");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  ASSERT_EQ(forced_predicted.exit_code, 0) << forced_predicted.output;
  EXPECT_EQ(forced_predicted.output, predicted.output);
  EXPECT_NE(predicted.output, alignments);
  const auto nbest = run_command(tool("tandem-decode") + " --checkpoint " + checkpoint +
                                 " --beam 2 --nbest 2 --alignments < " + src);
  ASSERT_EQ(nbest.exit_code, 0) << nbest.output;
  for (const auto& line : lines_of(nbest.output)) {
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 9) << line;  // four fields
  }
  const auto job = run_command(decode + " --alignments --input " + src + " --output " +
                               file("hyp.aligned") + " --ranks 2 --chunk-lines 7");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(read_text(file("hyp.aligned")), aligned.output);
}

// Tags taken from around words (paired, nested, self-closing, an entity) of a line.
std::string tagged(const std::string& line, size_t k) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  if (k % 4 == 3 || words.size() < 2) return line;  // left as it is
  std::string out;
  for (size_t w = 0; w < words.size(); ++w) {
    if (w > 0) out += ' ';
    if (w == 0 && k % 3 == 0) out += "<x id=\"" + std::to_string(k) + "\"/>";
    if (w == 1 && k % 2 == 0) {
      out += "<b class=\"a&amp;b\">" + words[w] + "</b>";
    } else if (w == 1) {
      out += "<a href=\"#" + std::to_string(k) + "\"><i>" + words[w] + "</i> &amp;</a>";
    } else {
      out += words[w];
    }
  }
  return out;
}

// tandem-decode --markup: every line comes out well-formed with each of its tags once, byte for
// byte, around the translation of its text; a line without markup comes out as without the flag;
// a file job writes the same; a line with a tag left open stops it with exit 2 naming the line.
TEST_F(GuidedAlignmentE2E, MarkupComesBackWellFormedAroundTheTranslationOfItsText) {
  const auto trained = train("markup", 1, 12);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string decode =
      tool("tandem-decode") + " --checkpoint " + run_dir("markup") + "/last.h5 --beam 2";
  const auto sources = lines_of(read_text(file("test.src")));
  std::string text, plain_text;
  for (size_t k = 0; k < sources.size(); ++k) {
    text += tagged(sources[k], k) + "\n";
    std::string plain = tagged(sources[k], k);  // the text the model reads
    for (const std::string tag : {"<b class=\"a&amp;b\">", "</b>", "<i>", "</i>", "</a>"}) {
      for (size_t at; (at = plain.find(tag)) != std::string::npos;) plain.erase(at, tag.size());
    }
    for (size_t at; (at = plain.find('<')) != std::string::npos;) {
      plain.erase(at, plain.find('>', at) + 1 - at);
    }
    for (size_t at; (at = plain.find("&amp;")) != std::string::npos;) plain.replace(at, 5, "&");
    plain_text += plain + "\n";
  }
  write_file(file("tagged.src"), text);
  write_file(file("untagged.src"), plain_text);
  const auto marked = run_command(decode + " --markup < " + file("tagged.src"));
  const auto plain = run_command(decode + " < " + file("untagged.src"));
  ASSERT_EQ(marked.exit_code, 0) << marked.output;
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const auto in = lines_of(text), out = lines_of(marked.output), translations = lines_of(plain.output);
  ASSERT_EQ(out.size(), in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    SCOPED_TRACE(in[k] + " → " + out[k]);
    if (k % 4 == 3 || in[k] == sources[k]) {
      EXPECT_EQ(out[k], translations[k]) << "no markup: as without --markup";
      continue;
    }
    // Each tag of the line once, byte for byte; nothing else between '<' and '>'.
    std::string rest = out[k];
    for (const std::string& tag :
         {"<x id=\"" + std::to_string(k) + "\"/>", std::string("<b class=\"a&amp;b\">"),
          std::string("</b>"), "<a href=\"#" + std::to_string(k) + "\">", std::string("<i>"),
          std::string("</i>"), std::string("</a>")}) {
      const bool expected = in[k].find(tag) != std::string::npos;
      const size_t at = rest.find(tag);
      EXPECT_EQ(at != std::string::npos, expected) << tag;
      if (at != std::string::npos) rest.erase(at, tag.size());
      EXPECT_EQ(rest.find(tag), std::string::npos) << tag << " twice";
    }
    EXPECT_EQ(rest.find('<'), std::string::npos) << rest;
    // The nesting: <i> inside <a>, each close after its open.
    if (in[k].find("<i>") != std::string::npos) {
      EXPECT_LT(out[k].find("<a href"), out[k].find("<i>"));
      EXPECT_LT(out[k].find("</i>"), out[k].find("</a>"));
    }
    for (size_t at; (at = rest.find("&amp;")) != std::string::npos;) rest.replace(at, 5, "&");
    EXPECT_EQ(rest, translations[k]) << "the text is the translation of the line's text";
  }
  // With int8 and with constraints (--json-input's text holds the markup) as well.
  const auto int8 = run_command(decode + " --markup --precision int8 < " + file("tagged.src"));
  ASSERT_EQ(int8.exit_code, 0) << int8.output;
  EXPECT_EQ(lines_of(int8.output).size(), in.size());
  const std::string first_word = sources[0].substr(0, sources[0].find(' '));
  write_file(file("tagged.json"),
             nlohmann::json{{"text", in[0]}, {"constraints", {first_word}}}.dump() + "\n");
  const auto json = run_command(decode + " --markup --json-input < " + file("tagged.json"));
  ASSERT_EQ(json.exit_code, 0) << json.output;
  EXPECT_NE(json.output.find("<x id=\"0\"/>"), std::string::npos) << json.output;
  EXPECT_NE(json.output.find(first_word), std::string::npos) << json.output;
  const auto job = run_command(decode + " --markup --input " + file("tagged.src") + " --output " +
                               file("tagged.out") + " --ranks 2 --chunk-lines 9");
  ASSERT_EQ(job.exit_code, 0) << job.output;
  EXPECT_EQ(read_text(file("tagged.out")), marked.output);
  write_file(file("open.src"), text + "a <b>bold\n");
  const auto open = run_command(decode + " --markup < " + file("open.src"));
  EXPECT_EQ(open.exit_code, 2);
  EXPECT_EQ(open.output, "tandem-decode: error: line " + std::to_string(in.size() + 1) +
                             ": <b> at byte 2 is never closed\n");
  const auto open_job = run_command(decode + " --markup --input " + file("open.src") +
                                    " --output " + file("open.out") + " --ranks 2");
  EXPECT_EQ(open_job.exit_code, 2);
  EXPECT_FALSE(std::filesystem::exists(file("open.out")));
}

// Heads the model lacks, named by the flags: one line, exit 2.
// A model trained without the alignment loss answers from every head of its train.alignment
// layer, averaged (none learnt to align more than another): the lines of --alignment-heads 4, the
// model's all, and not those of the two heads its config names, which a guided model reads.
TEST_F(GuidedAlignmentE2E, AModelTrainedWithoutTheLossIsReadWithAllTheLayersHeads) {
  const auto trained = train("unaligned", 1, 6, "--set train.alignment.weight=0");
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string score = tool("tandem-score") + " --checkpoint " + run_dir("unaligned") +
                            "/last.h5 --src " + file("test.src") + " --tgt " + file("test.tgt") +
                            " --alignments";
  const auto by_default = run_command(score + " | cut -f5");
  const auto all = run_command(score + " --alignment-heads 4 | cut -f5");
  const auto two = run_command(score + " --alignment-heads 2 | cut -f5");
  ASSERT_EQ(by_default.exit_code, 0) << by_default.output;
  ASSERT_EQ(all.exit_code, 0) << all.output;
  ASSERT_EQ(two.exit_code, 0) << two.output;
  EXPECT_EQ(by_default.output, all.output);
  EXPECT_NE(by_default.output, two.output);
}

TEST_F(GuidedAlignmentE2E, AlignmentFlagsNamingHeadsTheModelLacksAreRefused) {
  const auto trained = train("flags", 1, 2);
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  const std::string decode = tool("tandem-decode") + " --checkpoint " + run_dir("flags") +
                             "/last.h5 --alignments < " + file("test.src");
  const auto layer = run_command(decode + " --alignment-layer 3");
  EXPECT_EQ(layer.exit_code, 2);
  EXPECT_EQ(layer.output,
            "tandem-decode: error: --alignment-layer 3: the model's decoder has 3 layers (-3 to "
            "2)\n");
  const auto head = run_command(decode + " --alignment-head 4");
  EXPECT_EQ(head.exit_code, 2);
  EXPECT_EQ(head.output,
            "tandem-decode: error: --alignment-head 4: the model's layers have 4 heads\n");
  const auto score = run_command(tool("tandem-score") + " --checkpoint " + run_dir("flags") +
                                 "/last.h5 --src " + file("test.src") + " --tgt " +
                                 file("test.tgt") + " --alignments --alignment-heads 5");
  EXPECT_EQ(score.exit_code, 2);
  EXPECT_EQ(score.output,
            "tandem-score: error: --alignment-heads 5: the model's layers have 4 heads\n");
}

// Guided alignment without alignments, or on heads the model does not have: one line, exit 2,
// before a checkpoint directory exists.
TEST_F(GuidedAlignmentE2E, AskedOfACorpusWithoutAlignmentsOrOfHeadsTheModelLacksItIsRefused) {
  std::filesystem::create_directories(file("plain"));
  make_reverse_corpus(file("plain"));
  const auto unaligned = train("unaligned", 1, 2, "", "plain/corpus.h5");
  EXPECT_EQ(unaligned.exit_code, 2) << unaligned.output;
  EXPECT_NE(unaligned.output.find("train.alignment.weight is above 0 but corpus '" +
                                  file("plain/corpus.h5") +
                                  "' has no word alignments in its train split"),
            std::string::npos)
      << unaligned.output;
  const auto layer = train("layer", 1, 2, "--set train.alignment.layer=3");
  EXPECT_EQ(layer.exit_code, 2) << layer.output;
  EXPECT_NE(layer.output.find("train.alignment.layer: expected a decoder layer in [-3, 2]"),
            std::string::npos)
      << layer.output;
  const auto heads = train("heads", 1, 2, "--set train.alignment.heads=5");
  EXPECT_EQ(heads.exit_code, 2) << heads.output;
  EXPECT_NE(heads.output.find("train.alignment.heads: expected a number of heads in [1, 4]"),
            std::string::npos)
      << heads.output;
  for (const std::string run : {"unaligned", "layer", "heads"}) {
    EXPECT_FALSE(std::filesystem::exists(run_dir(run) + "/step-00000002.h5")) << run;
  }
}

}  // namespace
}  // namespace tandem::test
