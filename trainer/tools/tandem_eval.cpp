// tandem-eval: loss, perplexity, token accuracy, BLEU and chrF2 of a checkpoint on a corpus split
// or on raw source/reference files; or BLEU and chrF2 of a translation file alone.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "trainer/bleu/bleu_chrf.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/language_flags.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/error.h"
#include "trainer/eval/direction_scores.h"
#include "trainer/eval/evaluate.h"
#include "trainer/model_io/model_io.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-eval --checkpoint runs/tiny/last.h5 --split test
  tandem-eval --checkpoint runs/tiny/last.h5 --split valid --corpus other.h5
  tandem-eval --checkpoint runs/multi/last.h5 --split test        # each direction, and their mean
  tandem-eval --checkpoint runs/multi/last.h5 --split test --corpus-name en-es   # one of them
  tandem-eval --checkpoint runs/tiny/last.h5 --split test --beam 1      # greedy
  tandem-eval --checkpoint runs/tiny/last.h5 --src test.en --ref test.es --output hyp.es
  tandem-eval --checkpoint runs/tiny/last.h5 --checkpoint runs/tiny/best.h5 --split test  # ensemble
  tandem-eval --hyp hyp.es --ref test.es)";

struct Args {
  tandem::cli::ModelFlags models;
  std::string split, corpus, corpus_name, src, ref, hyp, output;
  int64_t max_tokens = 4096;
  bool json = false;
  tandem::decode::DecodeOptions decode;
  tandem::cli::LanguageFlags languages;  // for --src/--ref (a corpus's pairs carry theirs)
};

void print_scores(const tandem::eval::BleuScore& bleu, double chrf, nlohmann::json& record) {
  std::printf("%s\nchrF2 = %.2f\n", bleu.to_string().c_str(), chrf);
  record["bleu"] = bleu.score;
  record["chrf"] = chrf;
}

int score_file(const Args& args) {
  const auto hyps = tandem::cli::read_lines(args.hyp, "--hyp");
  const auto refs = tandem::cli::read_lines(args.ref, "--ref");
  if (hyps.size() != refs.size()) {
    throw std::invalid_argument("--hyp '" + args.hyp + "' has " + std::to_string(hyps.size()) +
                                " lines but --ref '" + args.ref + "' has " +
                                std::to_string(refs.size()));
  }
  nlohmann::json record;
  print_scores(tandem::eval::corpus_bleu(hyps, refs), tandem::eval::corpus_chrf(hyps, refs),
               record);
  if (args.json) std::cout << record.dump() << "\n";
  return 0;
}

// Pairs and detokenized references from a corpus split (only --corpus-name's range of it, when
// given), with where each direction's lie among them; or from raw files.
void load_pairs(const Args& args, const tandem::checkpoint::InferenceModel& m,
                std::vector<tandem::data::SentencePair>& pairs, std::vector<std::string>& refs,
                std::string& source, std::vector<tandem::eval::DirectionSlice>& slices) {
  if (!args.split.empty()) {
    const std::string path = args.corpus.empty() ? m.config.data.corpus : args.corpus;
    tandem::data::Corpus corpus(path);
    if (!corpus.has_split(args.split)) {
      throw std::invalid_argument("corpus '" + path + "' has no split '" + args.split + "'");
    }
    tandem::eval::EvaluatedPairs evaluated;
    try {
      evaluated =
          tandem::eval::evaluated_pairs(corpus.directions(), args.split, 0, args.corpus_name);
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("--corpus-name '" + args.corpus_name + "' in '" + path +
                                  "': " + e.what());
    }
    pairs = corpus.read(args.split, evaluated.indices);
    slices = std::move(evaluated.slices);
    for (const auto& pair : pairs) {
      refs.push_back(m.vocab.decode(pair.tgt, tandem::data::Side::kTarget));
    }
    source = args.split + " split of " + path;
    if (!args.corpus_name.empty()) source = "corpus " + args.corpus_name + " of the " + source;
    return;
  }
  const auto srcs = tandem::cli::read_lines(args.src, "--src");
  refs = tandem::cli::read_lines(args.ref, "--ref");
  if (srcs.size() != refs.size()) {
    throw std::invalid_argument("--src '" + args.src + "' has " + std::to_string(srcs.size()) +
                                " lines but --ref '" + args.ref + "' has " +
                                std::to_string(refs.size()));
  }
  const auto marks = tandem::cli::language_marks(m.vocab, args.languages);
  for (size_t i = 0; i < srcs.size(); ++i) {
    pairs.push_back({marks.source(m.vocab, srcs[i]), marks.target(m.vocab, refs[i])});
  }
  source = args.src + " / " + args.ref;
}

// "PATH (step N, averaged weights)" for each checkpoint, joined by " + ", with the ensemble weight
// of each when there are several; `record` gets the same (step and weights at its top level for
// one checkpoint, a "checkpoints" list for an ensemble).
std::string describe(const Args& args, const tandem::checkpoint::InferenceEnsemble& models,
                     nlohmann::json& record) {
  std::string out;
  const auto& members = models.members;
  for (size_t i = 0; i < members.size(); ++i) {
    const auto& m = members[i];
    const char* weights = m.averaged ? "averaged" : "raw";
    char line[128];
    std::snprintf(line, sizeof line, " (step %lld, %s weights", static_cast<long long>(m.step),
                  weights);
    out += (i > 0 ? " + " : "") + args.models.checkpoints[i] + line;
    nlohmann::json entry{
        {"checkpoint", args.models.checkpoints[i]}, {"step", m.step}, {"weights", weights}};
    if (members.size() > 1) {
      const double share = models.ensemble.weights()[i];
      std::snprintf(line, sizeof line, ", ensemble weight %.3g", share);
      out += line;
      entry["ensemble_weight"] = share;
      record["checkpoints"].push_back(entry);
    } else {
      record["step"] = m.step;
      record["weights"] = weights;
    }
    out += ")";
  }
  return out;
}

// Each direction's loss, BLEU and chrF2 (its slice of the pairs and of the translations already
// made), and their mean.
void print_directions(const tandem::decode::Ensemble& ensemble,
                      const std::vector<tandem::eval::DirectionSlice>& slices,
                      const std::vector<tandem::data::SentencePair>& pairs,
                      const std::vector<std::string>& refs, const std::vector<std::string>& hyps,
                      int64_t max_tokens, nlohmann::json& record) {
  const auto forced =
      tandem::eval::teacher_forced_by_direction(ensemble, pairs, slices, 0, 1, max_tokens);
  const auto qualities = tandem::eval::quality_by_direction(slices, hyps, refs);
  for (size_t d = 0; d < slices.size(); ++d) {
    const auto& f = forced[d];
    const auto& q = qualities[d];
    const auto count = static_cast<size_t>(slices[d].size());
    std::printf(
        "%s: %zu sentences | loss %.4f | perplexity %.2f | token accuracy %.2f%% | BLEU "
        "%.2f | chrF2 %.2f\n",
        slices[d].name.c_str(), count, f.loss, f.perplexity, 100.0 * f.accuracy, q.bleu, q.chrf);
    record["corpora"][slices[d].name] = {{"sentences", count},  {"loss", f.loss},
                                         {"ppl", f.perplexity}, {"accuracy", f.accuracy},
                                         {"bleu", q.bleu},      {"chrf", q.chrf}};
  }
  const tandem::eval::Quality mean = tandem::eval::mean_quality(qualities);
  std::printf("mean of %zu directions: BLEU %.2f | chrF2 %.2f\n", slices.size(), mean.bleu,
              mean.chrf);
  record["mean_bleu"] = mean.bleu;
  record["mean_chrf"] = mean.chrf;
}

int evaluate_checkpoint(Args args) {
  const auto models = tandem::cli::load_models(args.models, args.decode);
  const auto& first = models.members.front();
  std::vector<tandem::data::SentencePair> pairs;
  std::vector<std::string> refs;
  std::string source;
  std::vector<tandem::eval::DirectionSlice> slices;
  load_pairs(args, first, pairs, refs, source, slices);
  const auto result = tandem::eval::evaluate(models.ensemble, first.vocab, pairs, refs,
                                             args.max_tokens, args.decode);
  nlohmann::json record;
  const auto which = describe(args, models, record);
  const std::string device = models.ensemble.device().str();
  std::printf("%s %s in %s (%s) on %s: %zu sentences\n",
              models.members.size() > 1 ? "ensemble" : "checkpoint", which.c_str(),
              args.models.precision.c_str(), device.c_str(), source.c_str(), pairs.size());
  std::printf("loss %.4f | perplexity %.2f | token accuracy %.2f%%\n", result.forced.loss,
              result.forced.perplexity, 100.0 * result.forced.accuracy);
  record["precision"] = args.models.precision;
  record["device"] = device;
  record["sentences"] = pairs.size();
  record["loss"] = result.forced.loss;
  record["ppl"] = result.forced.perplexity;
  record["accuracy"] = result.forced.accuracy;
  record["tokens"] = result.forced.tokens;
  print_scores(result.bleu, result.chrf, record);
  if (args.corpus_name.empty() && slices.size() > 1) {
    print_directions(models.ensemble, slices, pairs, refs, result.hypotheses, args.max_tokens,
                     record);
  }
  if (!args.output.empty()) tandem::cli::write_lines(args.output, result.hypotheses, "--output");
  if (args.json) std::cout << record.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Evaluate a Tandem checkpoint (loss, perplexity, accuracy, BLEU, chrF2) or score a "
      "translation file."};
  Args args;
  tandem::cli::add_model_flags(app, args.models);
  app.add_option("--split", args.split, "corpus split to evaluate: valid or test")
      ->check(CLI::IsMember({"train", "valid", "test"}));
  app.add_option("--corpus", args.corpus,
                 "corpus file (default: the one the checkpoint was trained on)");
  app.add_option("--corpus-name", args.corpus_name,
                 "with --split, in a file of several corpora (tandem-prep --corpora): only this "
                 "one (default: all, then each one's scores and their mean)");
  app.add_option("--src", args.src, "raw source sentences, one per line");
  app.add_option("--ref", args.ref, "raw reference translations, one per line");
  app.add_option("--hyp", args.hyp, "translations to score against --ref (no checkpoint needed)");
  app.add_option("--output", args.output, "write the checkpoint's translations here");
  app.add_option("--max-tokens", args.max_tokens, "padded tokens per batch for the loss")
      ->check(tandem::cli::kPositive);
  tandem::cli::add_decode_flags(app, args.decode);
  tandem::cli::add_language_flags(app, args.languages);
  app.add_flag("--json", args.json, "also print the scores as one JSON line");
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-eval", argc, argv))
    return *done;
  return tandem::cli::run_tool("tandem-eval", [&] {
    if (!args.hyp.empty()) {
      if (args.ref.empty()) throw std::invalid_argument("--hyp needs --ref");
      return score_file(args);
    }
    if (args.models.checkpoints.empty())
      throw std::invalid_argument("give --checkpoint (or --hyp with --ref); see --help");
    if (args.split.empty() == (args.src.empty() || args.ref.empty())) {
      throw std::invalid_argument("give either --split valid|test or both --src and --ref");
    }
    if (!args.corpus_name.empty() && args.split.empty()) {
      throw std::invalid_argument("--corpus-name picks a corpus of a --split; give --split");
    }
    return evaluate_checkpoint(args);
  });
}
