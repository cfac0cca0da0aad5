// tandem-decode: translate stdin to stdout with a checkpoint, one sentence per line, in order
// (beam search; n-best lists on request).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "trainer/checkpoint/model_io.h"
#include "trainer/common/error.h"
#include "trainer/eval/evaluate.h"
#include "trainer/tools/decode_flags.h"
#include "trainer/tools/language_flags.h"
#include "trainer/tools/tool_main.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  echo "In the beginning God created the heavens and the earth." | \
    tandem-decode --checkpoint runs/tiny/last.h5
  tandem-decode --checkpoint runs/tiny/last.h5 < test.en > hyp.es
  tandem-decode --checkpoint runs/tiny/last.h5 --beam 1 < test.en > hyp.es      # greedy
  tandem-decode --checkpoint runs/tiny/last.h5 --beam 8 --nbest 4 < test.en > nbest.txt
  tandem-decode --checkpoint runs/tiny/last.h5 --checkpoint runs/tiny/best.h5 < test.en  # ensemble
  tandem-decode --checkpoint a.h5 --checkpoint b.h5 --weights 2 1 < test.en              # weighted
  tandem-decode --checkpoint runs/multi/last.h5 --target-lang es < test.en   # a multilingual model
  tandem-decode --checkpoint nllb.h5 --source-lang eng_Latn --target-lang spa_Latn < test.en
  tandem-decode --checkpoint runs/es-en/last.h5 --beam 1 --sampling topk:10 --seed 7 < mono.es
                              # back-translation by sampling: the same seed, the same lines
  echo ">>es<< In the beginning..." | tandem-decode --checkpoint runs/multi/last.h5    # the same

With --nbest N, each input line gives N lines, best first:
  INDEX ||| TRANSLATION ||| SCORE
INDEX is the 0-based input line, SCORE the length-normalised log-probability the hypotheses are
ranked by: (sum of token log-probabilities, EOS included) / length^lenpen, where length counts the
tokens plus EOS when emitted. --lenpen 1 ranks by the mean log-probability per token, 0 by the sum.)";

struct Output {
  bool nbest = false;  // INDEX ||| TRANSLATION ||| SCORE lines instead of one line per input
  size_t next_index = 0;
};

// Translates a chunk of lines and writes them, so output streams while input is still arriving.
// `marks` puts the languages where the model reads them.
void flush_chunk(const tandem::checkpoint::InferenceEnsemble& models,
                 std::vector<std::string>& lines, const tandem::decode::DecodeOptions& options,
                 const tandem::tools::LanguageMarks& marks, Output& output) {
  const auto& vocab = models.members.front().vocab;
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(lines.size());
  for (const auto& line : lines) sources.push_back(marks.source(vocab, line));
  // When sampling, each line draws from the stream of its index in the input.
  for (const auto& list : tandem::eval::translate_tokens_nbest(
           models.ensemble, vocab, sources, options, marks.first_tokens(sources.size()),
           static_cast<int64_t>(output.next_index))) {
    if (!output.nbest) std::cout << list.front().text << '\n';
    for (size_t i = 0; output.nbest && i < list.size(); ++i) {
      char score[32];
      std::snprintf(score, sizeof score, "%.6f", list[i].normalized);
      std::cout << output.next_index << " ||| " << list[i].text << " ||| " << score << '\n';
    }
    ++output.next_index;
  }
  std::cout.flush();
  lines.clear();
}

// --sampling (kept as text until parsed), --temperature and --seed.
void add_sampling_flags(CLI::App& app, std::string& sampling,
                        tandem::decode::SamplingOptions& options) {
  auto* sample = app.add_option(
      "--sampling", sampling,
      "draw each next token instead of searching (beam 1): topk:K (from the K likeliest), "
      "topp:P (from the fewest whose probabilities reach P) or full; back-translation by "
      "sampling");
  app.add_option("--temperature", options.temperature,
                 "divides the log-probabilities before sampling (below 1 sharper, above 1 "
                 "flatter)")
      ->capture_default_str()
      ->needs(sample);
  app.add_option("--seed", options.seed,
                 "the draws' seed: a line's draws depend on it and on the line's index alone")
      ->capture_default_str()
      ->needs(sample);
}

// Sampling as --sampling asks, at beam 1 (implied when --beam is not given); an explicit other
// beam is refused.
void apply_sampling(const CLI::App& app, const std::string& sampling,
                    tandem::decode::DecodeOptions& options) {
  options.sampling = tandem::decode::parse_sampling(sampling, options.sampling);
  if (app.get_option("--beam")->count() == 0) options.beam_size = 1;  // a draw per step
  if (options.beam_size != 1) {
    throw std::invalid_argument("--sampling " + sampling +
                                " draws one token per step: give --beam 1 (not --beam " +
                                std::to_string(options.beam_size) + ")");
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Translate standard input with a Tandem checkpoint (beam search, batched; in order)."};
  tandem::tools::ModelFlags flags;
  tandem::decode::DecodeOptions options;
  size_t chunk_lines = 500;
  tandem::tools::LanguageFlags languages;
  Output output;
  tandem::tools::add_model_flags(app, flags)->required();
  tandem::tools::add_decode_flags(app, options);
  auto* nbest = app.add_option("--nbest", options.nbest,
                               "write the N best translations per line, as INDEX ||| TRANSLATION "
                               "||| SCORE (N <= --beam)")
                    ->check(CLI::PositiveNumber);
  auto* chunk = app.add_option("--chunk-lines", chunk_lines,
                               "lines read before translating and writing them (default: 500 per "
                               "thread)")
                    ->check(CLI::PositiveNumber);
  tandem::tools::add_language_flags(app, languages);
  std::string sampling;
  add_sampling_flags(app, sampling, options.sampling);
  app.footer(kExamples);
  if (const auto done = tandem::tools::parse_command_line(app, "tandem-decode", argc, argv))
    return *done;
  output.nbest = nbest->count() > 0;
  return tandem::tools::run_tool("tandem-decode", [&] {
    if (options.nbest > options.beam_size) {
      throw std::invalid_argument("--nbest " + std::to_string(options.nbest) + " exceeds --beam " +
                                  std::to_string(options.beam_size) +
                                  ": an n-best list holds at most beam size hypotheses");
    }
    if (!sampling.empty()) apply_sampling(app, sampling, options);
    const auto models = tandem::tools::load_models(flags, options);
    const auto marks = tandem::tools::language_marks(models.members.front().vocab, languages);
    // Enough batches in a chunk for every thread to have some.
    if (chunk->count() == 0) chunk_lines *= static_cast<size_t>(options.threads);
    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      if (lines.size() >= chunk_lines) flush_chunk(models, lines, options, marks, output);
    }
    if (!lines.empty()) flush_chunk(models, lines, options, marks, output);
    return 0;
  });
}
