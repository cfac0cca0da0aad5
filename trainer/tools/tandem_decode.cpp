// tandem-decode: translate stdin to stdout with a checkpoint, one sentence per line, in order
// (beam search; n-best lists on request).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "data/direction.h"
#include "trainer/checkpoint/model_io.h"
#include "trainer/common/error.h"
#include "trainer/eval/evaluate.h"
#include "trainer/tools/decode_flags.h"
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

// ">>es<<" for --target-lang es, checked against the model's tags; "" without the option.
std::string target_tag(const std::string& language, const tandem::data::Vocab& vocab) {
  if (language.empty()) return "";
  const std::string tag = tandem::data::language_tag(language);
  if (vocab.tag_id(tag) >= 0) return tag;
  std::string known;
  for (const std::string& t : vocab.language_tags()) {
    known += (known.empty() ? "" : ", ") + t.substr(2, t.size() - 4);
  }
  throw std::invalid_argument(
      "--target-lang '" + language + "': " +
      (known.empty() ? "the model has no language tags (it translates one direction)"
                     : "not a language of the model (its target languages: " + known + ")"));
}

// Translates a chunk of lines and writes them, so output streams while input is still arriving.
// `tag` goes before each line that does not start with a tag of its own.
void flush_chunk(const tandem::checkpoint::InferenceEnsemble& models,
                 std::vector<std::string>& lines, const tandem::decode::DecodeOptions& options,
                 const std::string& tag, Output& output) {
  const auto& vocab = models.members.front().vocab;
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(lines.size());
  for (const auto& line : lines) {
    const bool tagged = tag.empty() || line.compare(0, 2, ">>") == 0;
    sources.push_back(vocab.encode(tagged ? line : tag + " " + line, tandem::data::Side::kSource));
  }
  for (const auto& list :
       tandem::eval::translate_tokens_nbest(models.ensemble, vocab, sources, options)) {
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Translate standard input with a Tandem checkpoint (beam search, batched; in order)."};
  tandem::tools::ModelFlags flags;
  tandem::decode::DecodeOptions options;
  size_t chunk_lines = 500;
  std::string target_lang;
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
  app.add_option("--target-lang", target_lang,
                 "a multilingual model: translate into this language (its >>xx<< tag before each "
                 "line; a line that starts with a tag keeps its own)");
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
    const auto models = tandem::tools::load_models(flags, options);
    const std::string tag = target_tag(target_lang, models.members.front().vocab);
    // Enough batches in a chunk for every thread to have some.
    if (chunk->count() == 0) chunk_lines *= static_cast<size_t>(options.threads);
    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      if (lines.size() >= chunk_lines) flush_chunk(models, lines, options, tag, output);
    }
    if (!lines.empty()) flush_chunk(models, lines, options, tag, output);
    return 0;
  });
}
