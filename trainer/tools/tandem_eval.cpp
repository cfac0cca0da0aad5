// tandem-eval: loss, perplexity, token accuracy, BLEU and chrF2 of a checkpoint on a corpus split
// or on raw source/reference files; or BLEU and chrF2 of a translation file alone.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <string>
#include <vector>

#include "data/corpus.h"
#include "trainer/checkpoint/model_io.h"
#include "trainer/common/error.h"
#include "trainer/eval/bleu_chrf.h"
#include "trainer/eval/evaluate.h"
#include "trainer/tools/decode_flags.h"
#include "trainer/tools/tool_main.h"

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
  tandem::tools::ModelFlags models;
  std::string split, corpus, corpus_name, src, ref, hyp, output;
  int64_t max_tokens = 4096;
  bool json = false;
  tandem::decode::DecodeOptions decode;
};

void print_scores(const tandem::eval::BleuScore& bleu, double chrf, nlohmann::json& record) {
  std::printf("%s\nchrF2 = %.2f\n", bleu.to_string().c_str(), chrf);
  record["bleu"] = bleu.score;
  record["chrf"] = chrf;
}

int score_file(const Args& args) {
  const auto hyps = tandem::tools::read_lines(args.hyp, "--hyp");
  const auto refs = tandem::tools::read_lines(args.ref, "--ref");
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

// A corpus of a file of several, as evaluated: its name and its pairs' range among those loaded.
struct Direction {
  std::string name;
  size_t first = 0, count = 0;
};

// The corpora of `corpus` that have `split` (none for a file of one corpus), or only the one
// --corpus-name names; std::invalid_argument naming the corpora when it names none of them.
std::vector<Direction> directions_of(const tandem::data::Corpus& corpus, const Args& args) {
  std::vector<Direction> directions;
  std::string names;
  for (const auto& part : corpus.corpora()) {
    names += (names.empty() ? "" : ", ") + part.name;
    const auto range = part.ranges.find(args.split);
    if (part.name.empty() || range == part.ranges.end()) continue;
    if (!args.corpus_name.empty() && part.name != args.corpus_name) continue;
    directions.push_back({part.name, static_cast<size_t>(range->second.first),
                          static_cast<size_t>(range->second.second)});
  }
  if (!args.corpus_name.empty() && directions.empty()) {
    throw std::invalid_argument("--corpus-name '" + args.corpus_name + "': no such corpus with a " +
                                args.split + " split in '" + corpus.path() + "' (its corpora: " +
                                (names.empty() ? "one, unnamed" : names) + ")");
  }
  return directions;
}

// Pairs and detokenized references from a corpus split (only --corpus-name's range of it, when
// given: then `directions` is that one corpus, its range from 0), or from raw files.
void load_pairs(const Args& args, const tandem::checkpoint::InferenceModel& m,
                std::vector<tandem::data::SentencePair>& pairs, std::vector<std::string>& refs,
                std::string& source, std::vector<Direction>& directions) {
  if (!args.split.empty()) {
    const std::string path = args.corpus.empty() ? m.config.data.corpus : args.corpus;
    tandem::data::Corpus corpus(path);
    if (!corpus.has_split(args.split)) {
      throw std::invalid_argument("corpus '" + path + "' has no split '" + args.split + "'");
    }
    directions = directions_of(corpus, args);
    size_t first = 0, count = static_cast<size_t>(corpus.size(args.split));
    if (!args.corpus_name.empty()) {
      first = directions.front().first;
      count = directions.front().count;
      directions.front().first = 0;
    }
    std::vector<int64_t> all(count);
    std::iota(all.begin(), all.end(), static_cast<int64_t>(first));
    pairs = corpus.read(args.split, all);
    for (const auto& pair : pairs) {
      refs.push_back(m.vocab.decode(pair.tgt, tandem::data::Side::kTarget));
    }
    source = args.split + " split of " + path;
    if (!args.corpus_name.empty()) source = "corpus " + args.corpus_name + " of the " + source;
    return;
  }
  const auto srcs = tandem::tools::read_lines(args.src, "--src");
  refs = tandem::tools::read_lines(args.ref, "--ref");
  if (srcs.size() != refs.size()) {
    throw std::invalid_argument("--src '" + args.src + "' has " + std::to_string(srcs.size()) +
                                " lines but --ref '" + args.ref + "' has " +
                                std::to_string(refs.size()));
  }
  for (size_t i = 0; i < srcs.size(); ++i) {
    pairs.push_back({m.vocab.encode(srcs[i], tandem::data::Side::kSource),
                     m.vocab.encode(refs[i], tandem::data::Side::kTarget)});
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
                      const std::vector<Direction>& directions,
                      const std::vector<tandem::data::SentencePair>& pairs,
                      const std::vector<std::string>& refs, const std::vector<std::string>& hyps,
                      int64_t max_tokens, nlohmann::json& record) {
  double bleu_sum = 0, chrf_sum = 0;
  for (const Direction& d : directions) {
    const auto from = static_cast<std::ptrdiff_t>(d.first);
    const auto to = static_cast<std::ptrdiff_t>(d.first + d.count);
    const auto forced = tandem::eval::teacher_forced(
        ensemble, std::vector<tandem::data::SentencePair>(pairs.begin() + from, pairs.begin() + to),
        max_tokens);
    const std::vector<std::string> h(hyps.begin() + from, hyps.begin() + to);
    const std::vector<std::string> r(refs.begin() + from, refs.begin() + to);
    const auto bleu = tandem::eval::corpus_bleu(h, r);
    const double chrf = tandem::eval::corpus_chrf(h, r);
    std::printf(
        "%s: %zu sentences | loss %.4f | perplexity %.2f | token accuracy %.2f%% | BLEU "
        "%.2f | chrF2 %.2f\n",
        d.name.c_str(), d.count, forced.loss, forced.perplexity, 100.0 * forced.accuracy,
        bleu.score, chrf);
    record["corpora"][d.name] = {{"sentences", d.count},     {"loss", forced.loss},
                                 {"ppl", forced.perplexity}, {"accuracy", forced.accuracy},
                                 {"bleu", bleu.score},       {"chrf", chrf}};
    bleu_sum += bleu.score;
    chrf_sum += chrf;
  }
  const double n = static_cast<double>(directions.size());
  std::printf("mean of %zu directions: BLEU %.2f | chrF2 %.2f\n", directions.size(), bleu_sum / n,
              chrf_sum / n);
  record["mean_bleu"] = bleu_sum / n;
  record["mean_chrf"] = chrf_sum / n;
}

int evaluate_checkpoint(Args args) {
  const auto models = tandem::tools::load_models(args.models, args.decode);
  const auto& first = models.members.front();
  std::vector<tandem::data::SentencePair> pairs;
  std::vector<std::string> refs;
  std::string source;
  std::vector<Direction> directions;
  load_pairs(args, first, pairs, refs, source, directions);
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
  print_scores(result.bleu, result.chrf, record);
  if (args.corpus_name.empty() && directions.size() > 1) {
    print_directions(models.ensemble, directions, pairs, refs, result.hypotheses, args.max_tokens,
                     record);
  }
  if (!args.output.empty()) tandem::tools::write_lines(args.output, result.hypotheses, "--output");
  if (args.json) std::cout << record.dump() << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Evaluate a Tandem checkpoint (loss, perplexity, accuracy, BLEU, chrF2) or score a "
      "translation file."};
  Args args;
  tandem::tools::add_model_flags(app, args.models);
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
      ->check(CLI::PositiveNumber);
  tandem::tools::add_decode_flags(app, args.decode);
  app.add_flag("--json", args.json, "also print the scores as one JSON line");
  app.footer(kExamples);
  if (const auto done = tandem::tools::parse_command_line(app, "tandem-eval", argc, argv))
    return *done;
  return tandem::tools::run_tool("tandem-eval", [&] {
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
