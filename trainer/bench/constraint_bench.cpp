#include "trainer/bench/constraint_bench.h"

#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "trainer/checkpoint/model_io.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/token_ids.h"
#include "trainer/eval/bleu_chrf.h"
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

// Whether the vocabulary writes `phrase` with pieces of its own (no <unk>).
bool tokenizes(const data::Vocab& vocab, const std::vector<int32_t>& phrase) {
  for (const int32_t token : phrase) {
    if (token == kUnkId || vocab.special(token)) return false;
  }
  return !phrase.empty();
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
    auto tokens = vocab.encode(phrase, data::Side::kTarget);
    if (tokenizes(vocab, tokens)) out.include.push_back(std::move(tokens));
  }
  return out;
}

// Of every line's include phrases, how many its translation holds (as tokens), and how many in
// all.
std::pair<int64_t, int64_t> phrases_held(const Sentences& outputs,
                                         const std::vector<decode::Constraints>& constraints) {
  int64_t held = 0, all = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
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

void print_measured(const char* name, int64_t beam, const Measured& m) {
  std::printf("beam %-3lld %-13s %8.2f %9.2f %10.1f %7.2f %6lld/%lld\n",
              static_cast<long long>(beam), name, m.timing.wall,
              m.timing.text.size() / m.timing.wall, m.timing.tokens_per_second(), m.bleu,
              static_cast<long long>(m.held), static_cast<long long>(m.phrases));
}

// One beam's two rows, unconstrained and constrained, their runs alternating so that drift
// moves both alike; printed, and returned as a JSON row.
nlohmann::json measure_beam(const DecodeBenchOptions& o, const checkpoint::InferenceModel& m,
                            const Sentences& sources,
                            const std::vector<decode::Constraints>& constraints,
                            const std::vector<std::string>& refs) {
  const std::vector<decode::Constraints> none(sources.size());
  std::vector<Timing> runs[2];
  Sentences outputs[2];
  for (int r = 0; r < o.repeat; ++r) {
    for (int c = 0; c < 2; ++c) {
      runs[c].push_back(timed_once(m.vocab, [&] {
        outputs[c].clear();
        for (auto& h : decode::translate(m.model, sources, o.decode, {}, 0,
                                         c == 0 ? none : constraints)) {
          outputs[c].push_back(std::move(h.tokens));
        }
        return outputs[c];
      }));
    }
  }
  Measured result[2];
  const int64_t beam = o.decode.beam_size;
  for (int c = 0; c < 2; ++c) {
    result[c].timing = median_run(std::move(runs[c]));
    result[c].bleu = eval::corpus_bleu(result[c].timing.text, refs).score;
    std::tie(result[c].held, result[c].phrases) = phrases_held(outputs[c], constraints);
    print_measured(c == 0 ? "unconstrained" : "constrained", beam, result[c]);
  }
  const double ratio = result[0].timing.wall / result[1].timing.wall;
  std::printf("beam %lld: constrained decodes %.2fx the lines/s of unconstrained, BLEU %+.2f, "
              "%.1f %% of phrases held (unconstrained %.1f %%)\n",
              static_cast<long long>(beam), ratio, result[1].bleu - result[0].bleu,
              100.0 * result[1].held / std::max<int64_t>(result[1].phrases, 1),
              100.0 * result[0].held / std::max<int64_t>(result[0].phrases, 1));
  return {{"beam", beam},
          {"speed_ratio", ratio},
          {"bleu", result[0].bleu},
          {"bleu_constrained", result[1].bleu},
          {"phrases", result[1].phrases},
          {"held", result[1].held},
          {"held_unconstrained", result[0].held}};
}

}  // namespace

int run_constraint_bench(DecodeBenchOptions o) {
  if (o.ref.empty()) throw std::invalid_argument("--constraints draws phrases from --ref: give it");
  const torch::Device device = runtime::inference_device(o.device_flag);
  cli::check_precision_on(o.precisions.front(), device);
  runtime::configure_cpu_runtime({1, 0, runtime::Workload::kDecoding});
  auto m = checkpoint::load_for_inference(o.checkpoint);
  cli::place_model(m.model, o.precisions.front(), device);
  auto lines = cli::read_lines(o.input, "--input");
  auto refs = cli::read_lines(o.ref, "--ref");
  if (o.max_lines > 0 && lines.size() > o.max_lines) lines.resize(o.max_lines);
  if (refs.size() < lines.size()) throw std::invalid_argument("--ref has fewer lines than --input");
  refs.resize(lines.size());
  Sentences sources;
  std::vector<decode::Constraints> constraints;
  for (size_t i = 0; i < lines.size(); ++i) {
    sources.push_back(m.vocab.encode(lines[i], data::Side::kSource));
    constraints.push_back(reference_phrases(refs[i], i, m.vocab));
  }
  o.decode.threads = o.thread_counts.front();
  std::printf("%zu sentences, %s, %lld thread(s), median of %d run(s); phrases: two reference "
              "words in a row, and a third word from references of 8 words or more\n",
              lines.size(), o.precisions.front().c_str(), static_cast<long long>(o.decode.threads),
              o.repeat);
  std::printf("%-18s %8s %9s %10s %7s %13s\n", "decoding", "wall s", "lines/s", "tokens/s",
              "BLEU", "phrases held");
  nlohmann::json record{{"sentences", lines.size()}, {"rows", {}}};
  for (const int64_t beam : o.beams) {
    o.decode.beam_size = beam;
    record["rows"].push_back(measure_beam(o, m, sources, constraints, refs));
  }
  std::printf("%s\n", record.dump().c_str());
  return 0;
}

}  // namespace tandem::bench
