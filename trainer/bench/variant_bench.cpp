#include "trainer/bench/variant_bench.h"

#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "data/shortlist/shortlist.h"
#include "trainer/bleu/bleu_chrf.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/decode_input.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/temp_dir.h"
#include "trainer/model_io/model_io.h"
#include "trainer/runtime/cpu_runtime.h"
#include "trainer/runtime/device.h"

namespace tandem::bench {
namespace {

std::vector<std::string> words_of(const std::string& line) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

// Line `line`'s phrases: two reference words in a row, and from a reference of 8 words or more
// a third word apart from them, picked by the line's index so that every run picks the same.
decode::Constraints reference_phrases(const std::string& ref, size_t line,
                                      const data::Vocab& vocab) {
  const auto words = words_of(ref);
  decode::Constraints out;
  if (words.size() < 2) return out;
  const size_t at = (line * 7) % (words.size() - 1);
  std::vector<std::string> phrases = {words[at] + " " + words[at + 1]};
  if (words.size() >= 8) phrases.push_back(words[(at + 4) % words.size()]);
  for (const auto& phrase : phrases) {
    try {
      out.include.push_back(cli::phrase_tokens(phrase, "reference phrase", vocab));
    } catch (const std::invalid_argument&) {
      // A reference word the vocabulary cannot write (with <unk>) is no constraint.
    }
  }
  return out;
}

// Of every line's include phrases, how many its translation holds (as tokens), and how many in
// all.
std::pair<int64_t, int64_t> phrases_held(const Sentences& outputs,
                                         const std::vector<decode::Constraints>& constraints) {
  int64_t held = 0, all = 0;
  for (size_t i = 0; i < constraints.size(); ++i) {
    for (const auto& phrase : constraints[i].include) {
      held += decode::contains_phrase(outputs[i], phrase) ? 1 : 0;
      ++all;
    }
  }
  return {held, all};
}

struct Measured {
  Timing timing;
  double bleu = 0;
  int64_t held = 0, phrases = 0;
};

void print_measured(const char* name, const std::string& precision, int64_t beam,
                    const Measured& m) {
  std::printf("%-4s beam %-3lld %-11s %8.2f %9.2f %10.1f %7.2f %6lld/%lld\n", precision.c_str(),
              static_cast<long long>(beam), name, m.timing.wall,
              m.timing.text.size() / m.timing.wall, m.timing.tokens_per_second(), m.bleu,
              static_cast<long long>(m.held), static_cast<long long>(m.phrases));
}

// The variant: constraints per line, or a shortlist.
struct Variant {
  std::string name;                                  // "constrained", "shortlist"
  std::vector<decode::Constraints> constraints;      // per line; none: a shortlist
  std::shared_ptr<const data::Shortlist> shortlist;  // null: constraints
};

// The plain decoding's (0) and the variant's (1) median of o.repeat runs, and with `vmap` a third:
// CTranslate2 with the same list through its vocabulary map (o.ctranslate2's folder, exported
// with it), on the same sentences and settings. The runs take turns a round at a time, so that a
// machine that speeds up or slows down meanwhile moves them all alike; `outputs` gets Tandem's
// translations.
std::vector<Timing> alternating_runs(const DecodeBenchOptions& o, const model::Transformer& model,
                                     const data::Vocab& vocab, const Sentences& sources,
                                     const Variant& variant, const std::string& precision,
                                     bool vmap, Sentences (&outputs)[2]) {
  decode::DecodeOptions options[2] = {o.decode, o.decode};
  options[1].shortlist = variant.shortlist;
  std::vector<decode::RowInput> constrained(variant.constraints.size());
  for (size_t i = 0; i < constrained.size(); ++i) {
    constrained[i].constraints = variant.constraints[i];
  }
  std::vector<std::function<Timing()>> runners;
  for (int c = 0; c < 2; ++c) {
    runners.push_back([&, c] {
      return timed_once(vocab, [&] {
        outputs[c].clear();
        for (auto& h : decode::translate(model, sources, options[c],
                                         c == 0 ? std::vector<decode::RowInput>{} : constrained)) {
          outputs[c].push_back(std::move(h.tokens));
        }
        return outputs[c];
      });
    });
  }
  const TempDir work("bench-vmap");
  Ct2DecodeOptions ct2 = o.ctranslate2;
  ct2.use_vmap = true;
  if (vmap) {
    runners.push_back([&] {
      return timed_ctranslate2(ct2, vocab, sources, precision, static_cast<int>(o.decode.threads),
                               o.decode, model->options().max_positions, work.path());
    });
  }
  return alternating_medians(o.repeat, runners);
}

// One precision and beam's two rows, plain and the variant: printed, and returned as a JSON row.
nlohmann::json measure_pair(const DecodeBenchOptions& o, const std::string& precision,
                            const model::Transformer& model, const data::Vocab& vocab,
                            const Sentences& sources, const Variant& variant,
                            const std::vector<std::string>& refs) {
  Sentences outputs[2];
  const bool vmap = variant.shortlist && !o.ctranslate2.model_dir.empty();
  const auto medians =
      alternating_runs(o, model, vocab, sources, variant, precision, vmap, outputs);
  Measured result[2];
  const int64_t beam = o.decode.beam_size;
  for (int c = 0; c < 2; ++c) {
    result[c].timing = medians[c];
    result[c].bleu = eval::corpus_bleu(result[c].timing.text, refs).score;
    std::tie(result[c].held, result[c].phrases) = phrases_held(outputs[c], variant.constraints);
    print_measured(c == 0 ? "plain" : variant.name.c_str(), precision, beam, result[c]);
  }
  const double ratio = result[0].timing.wall / result[1].timing.wall;
  std::printf("%s, beam %lld: %s decodes %.2fx the lines/s of plain, BLEU %+.2f", precision.c_str(),
              static_cast<long long>(beam), variant.name.c_str(), ratio,
              result[1].bleu - result[0].bleu);
  if (result[1].phrases > 0) {
    std::printf(", %.1f %% of phrases held (plain %.1f %%)",
                100.0 * result[1].held / result[1].phrases,
                100.0 * result[0].held / result[0].phrases);
  }
  std::printf("\n");
  if (vmap) {
    const Timing& ct2 = medians[2];
    std::printf("%s, beam %lld: CTranslate2 with the same list (vmap) %.2f s, BLEU %.2f: Tandem's "
                "shortlist decodes %.2fx its lines/s\n",
                precision.c_str(), static_cast<long long>(beam), ct2.wall,
                eval::corpus_bleu(ct2.text, refs).score, ct2.wall / result[1].timing.wall);
  }
  return {{"precision", precision},
          {"beam", beam},
          {"speed_ratio", ratio},
          {"bleu", result[0].bleu},
          {"bleu_variant", result[1].bleu},
          {"phrases", result[1].phrases},
          {"held", result[1].held},
          {"held_plain", result[0].held}};
}

// The input's sources and the variant: the shortlist file's list, or each line's phrases of its
// reference (`refs`) when `shortlist` is "".
Variant read_variant(const std::string& shortlist, const std::vector<std::string>& refs,
                     const data::Vocab& vocab) {
  Variant variant;
  variant.name = shortlist.empty() ? "constrained" : "shortlist";
  if (!shortlist.empty()) {
    variant.shortlist = std::make_shared<const data::Shortlist>(data::Shortlist::load(shortlist));
    return variant;
  }
  for (size_t i = 0; i < refs.size(); ++i) {
    variant.constraints.push_back(reference_phrases(refs[i], i, vocab));
  }
  return variant;
}

}  // namespace

int run_variant_bench(DecodeBenchOptions o, const std::string& shortlist) {
  if (o.ref.empty()) throw std::invalid_argument("the variants are scored against --ref: give it");
  const torch::Device device = runtime::inference_device(o.device_flag);
  runtime::configure_cpu_runtime({1, 0, runtime::Workload::kDecoding});
  auto first = checkpoint::load_for_inference(o.checkpoint);  // the first precision's model
  const auto& vocab = first.vocab;
  auto lines = cli::read_lines(o.input, "--input");
  auto refs = cli::read_lines(o.ref, "--ref");
  if (o.max_lines > 0 && lines.size() > o.max_lines) lines.resize(o.max_lines);
  if (refs.size() < lines.size()) throw std::invalid_argument("--ref has fewer lines than --input");
  refs.resize(lines.size());
  Sentences sources;
  for (const auto& line : lines) sources.push_back(vocab.encode(line, data::Side::kSource));
  const Variant variant = read_variant(shortlist, refs, vocab);
  o.decode.threads = o.thread_counts.front();
  if (!o.ctranslate2.model_dir.empty()) {
    if (shortlist.empty()) throw std::invalid_argument("--ctranslate2 compares with --shortlist");
    check_ctranslate2(o.ctranslate2);
    same_length_limit(o, first.model->options().max_positions);
  }
  std::printf("%zu sentences, %lld thread(s), median of %d run(s)%s\n", lines.size(),
              static_cast<long long>(o.decode.threads), o.repeat,
              shortlist.empty() ? "; phrases: two reference words in a row, and a third word "
                                  "from references of 8 words or more"
                                : "");
  std::printf("%-24s %8s %9s %10s %7s %13s\n", "decoding", "wall s", "lines/s", "tokens/s",
              "BLEU", "phrases held");
  nlohmann::json record{{"sentences", lines.size()}, {"variant", variant.name}, {"rows", {}}};
  for (size_t p = 0; p < o.precisions.size(); ++p) {
    cli::check_precision_on(o.precisions[p], device);
    // Each precision prepares a model of its own (place_model freezes it in place).
    auto model = p == 0 ? first.model : checkpoint::load_for_inference(o.checkpoint).model;
    cli::place_model(model, o.precisions[p], device);
    for (const int64_t beam : o.beams) {
      o.decode.beam_size = beam;
      record["rows"].push_back(
          measure_pair(o, o.precisions[p], model, vocab, sources, variant, refs));
    }
  }
  std::printf("%s\n", record.dump().c_str());
  return 0;
}

}  // namespace tandem::bench
