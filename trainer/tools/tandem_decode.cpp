// tandem-decode: translate stdin to stdout with a checkpoint, one sentence per line, in order
// (beam search or sampling; n-best lists on request); or a file into a file in chunks, resumable,
// alone or on N ranks and nodes (--input/--output with --ranks, --hostfile or under mpirun).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "data/shortlist/shortlist.h"
#include "data/vocab/words.h"
#include "trainer/bulk/chunked_tool.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/cli/alignment_flags.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/decode_input.h"
#include "trainer/cli/language_flags.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/fnv_hash.h"
#include "trainer/eval/evaluate.h"
#include "trainer/jobs/job_environment.h"
#include "trainer/markup/markup.h"
#include "trainer/model_io/model_io.h"

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
  tandem-decode --checkpoint runs/es-en/last.h5 --beam 1 --sampling topk:10 --seed 7 \
    --input mono.es --output bt.en --ranks 2 --max-restarts 2
                              # a file in chunks on 2 ranks: rerun the same command to resume
  tandem-decode --checkpoint big.h5 --input mono.es --output bt.en --hostfile hosts  # nodes
  tandem-decode --checkpoint runs/tiny/last.h5 --shortlist runs/tiny/shortlist.h5 < test.en
                              # the output layer on a shortlist (tandem-shortlist)
  echo '{"text": "In the beginning God created the heavens.", "constraints": ["los cielos"]}' | \
    tandem-decode --checkpoint runs/tiny/last.h5 --json-input     # terminology constraints
  tandem-decode --checkpoint runs/aligned/last.h5 --alignments < test.en > hyp.es.align
                              # TRANSLATION<tab>0-0 1-2 2-1 (docs/alignments.md)
  echo 'Click <a href="/buy">here</a> to <b>buy</b> it.' | \
    tandem-decode --checkpoint runs/aligned/last.h5 --markup     # tags carried across

With --input and --output, the input is cut into chunks of --chunk-lines lines, which the ranks
translate one at a time; each finished chunk is kept in OUTPUT.parts/, and OUTPUT appears whole
once every chunk is done (with OUTPUT.job.json, the job's record). The same command run again,
after a kill, a stop or a requeue, resumes at the first unfinished chunk; the output is the same
bytes at any rank count. A different command on an existing output is refused.

With --json-input, each line is a JSON object (Sockeye's form):
  {"text": "...", "constraints": ["phrase", ...], "avoid": ["phrase", ...]}
Every translation of the line (each of an n-best list) contains each "constraints" phrase and no
"avoid" phrase, as target tokens (a phrase is tokenized as the target side is, so it matches
where it stands as words of its own). A line that is not such an object, or a phrase the target
vocabulary cannot tokenize, stops tandem-decode with exit 2 naming the line: with --input before
anything is translated, from standard input before any line of its chunk is written.

With --alignments, each translation is followed by a tab and its word alignment, Pharaoh's
"i-j" pairs (source word i, target word j, words counted between white space from 0), from the
attention of the checkpoint's alignment heads (train.alignment): each target piece linked to the
source piece it attended to most, pieces merged to their words.

With --markup, a line may hold inline tags (paired, nested, self-closing, with attributes;
comments) and entities (&amp; &lt; &gt; &quot; &apos; &nbsp; &#N; &#xN;). The text between the
tags, unescaped, is translated; a paired tag then wraps the run of target words that are clearly
more the source words it wrapped than not (by the alignment heads' attention: each word's share
of its attention on them plus its share of what one of them receives, past 1.2), a self-closing
tag stands before the translation of the source word after it, every tag byte for byte as it
came, and the text is escaped back. A line without tags or entities is written as without
--markup. A tag left open, tags that cross, a stray '<' or an unknown entity stop tandem-decode
with exit 2 naming the line (docs/alignments.md).

With --nbest N, each input line gives N lines, best first:
  INDEX ||| TRANSLATION ||| SCORE        (with --alignments: ||| ALIGNMENT after it)
INDEX is the 0-based input line, SCORE the length-normalised log-probability the hypotheses are
ranked by: (sum of token log-probabilities, EOS included) / length^lenpen, where length counts the
tokens plus EOS when emitted. --lenpen 1 ranks by the mean log-probability per token, 0 by the sum.)";

// How tandem-decode reads and writes lines, the same for every chunk.
struct LineFormat {
  tandem::data::LanguageMarks marks;  // puts the languages where the model reads them
  bool json = false;                  // --json-input: JSON lines with constraints
  bool nbest = false;                 // INDEX ||| TRANSLATION ||| SCORE lines
  bool alignments = false;            // each translation's word alignment after it
  bool markup = false;                // --markup: tags and entities carried across
};

// With --markup, each line's tags and entities taken out (markup/markup.h); a bad line is
// std::invalid_argument "line N: ...", where lines[0] is line first_line (1-based).
std::vector<tandem::markup::MarkedLine> marked_lines(const std::vector<std::string>& lines,
                                                     int64_t first_line) {
  std::vector<tandem::markup::MarkedLine> marked;
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      marked.push_back(tandem::markup::parse(lines[i]));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("line " + std::to_string(first_line + static_cast<int64_t>(i)) +
                                  ": " + e.what());
    }
  }
  return marked;
}

// A translation's word alignment, from the source words of its line's pieces.
std::string word_alignment(const std::vector<int32_t>& source_words,
                           const tandem::eval::Translation& translation) {
  return tandem::data::pharaoh(
      tandem::data::word_links(source_words, translation.words, translation.attended));
}

// With --markup, per line and per translation in its list, the attention between their words
// that puts the tags back: the alignment heads' whole rows, from a teacher-forced pass over each
// translation of a marked line (beam search keeps only each row's strongest position); none for
// an unmarked line, which is written as the model wrote it.
std::vector<std::vector<tandem::data::WordAttention>> markup_attention(
    const tandem::decode::Ensemble& ensemble, const std::vector<tandem::markup::MarkedLine>& marked,
    const std::vector<std::vector<int32_t>>& sources,
    const std::vector<std::vector<int32_t>>& source_words,
    const std::vector<std::vector<tandem::eval::Translation>>& lists,
    const tandem::decode::DecodeOptions& options) {
  std::vector<tandem::data::SentencePair> pairs;
  std::vector<std::pair<size_t, size_t>> of_pair;  // (line, translation)
  for (size_t line = 0; line < lists.size(); ++line) {
    for (size_t i = 0; marked[line].marked && i < lists[line].size(); ++i) {
      pairs.push_back({sources[line], lists[line][i].tokens});
      of_pair.emplace_back(line, i);
    }
  }
  std::vector<std::vector<tandem::data::WordAttention>> out(lists.size());
  for (size_t line = 0; line < lists.size(); ++line) out[line].resize(lists[line].size());
  if (pairs.empty()) return out;
  const auto rows =
      tandem::eval::forced_attention(ensemble, pairs, options.batch_tokens, *options.alignment);
  for (size_t p = 0; p < pairs.size(); ++p) {
    const auto [line, i] = of_pair[p];
    // The positions the pass read (a source past the model's positions is cut), then EOS.
    auto words = source_words[line];
    words.resize(static_cast<size_t>(rows[p].positions - 1));
    words.push_back(-1);
    out[line][i] = tandem::data::word_attention(words, lists[line][i].words, rows[p].rows,
                                                rows[p].positions);
  }
  return out;
}

// Translates `lines` (line i is line first_index + i of the input, 0-based) into their output
// text: one line each, or with `nbest` the INDEX ||| TRANSLATION ||| SCORE lines. A bad JSON line
// is std::invalid_argument naming its 1-based line number, before anything is translated.
std::string translate_lines(const tandem::checkpoint::InferenceEnsemble& models,
                            const std::vector<std::string>& lines,
                            const tandem::decode::DecodeOptions& options, const LineFormat& format,
                            int64_t first_index) {
  const auto& vocab = models.members.front().vocab;
  const auto input = tandem::cli::read_input_lines(lines, format.json, vocab, first_index + 1);
  const auto marked = format.markup ? marked_lines(input.texts, first_index + 1)
                                    : std::vector<tandem::markup::MarkedLine>{};
  const bool words = format.alignments || format.markup;
  std::vector<std::vector<int32_t>> sources, source_words(lines.size());
  sources.reserve(lines.size());
  for (size_t i = 0; i < input.texts.size(); ++i) {
    const auto& text = format.markup ? marked[i].text : input.texts[i];
    sources.push_back(words ? format.marks.source(vocab, text, &source_words[i])
                            : format.marks.source(vocab, text));
  }
  // When sampling, each line draws from the stream of its index in the input.
  auto rows = tandem::decode::first_token_rows(format.marks.first_tokens(sources.size()));
  rows.resize(sources.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].stream = first_index + static_cast<int64_t>(i);
    if (!input.constraints.empty()) rows[i].constraints = input.constraints[i];
  }
  const auto lists =
      tandem::eval::translate_tokens_nbest(models.ensemble, vocab, sources, options, rows);
  const auto attention =
      format.markup
          ? markup_attention(models.ensemble, marked, sources, source_words, lists, options)
          : std::vector<std::vector<tandem::data::WordAttention>>{};
  std::ostringstream out;
  int64_t index = first_index;
  const bool nbest = format.nbest;
  for (const auto& list : lists) {
    const auto line = static_cast<size_t>(index - first_index);
    // The translation as written: its tags put back with --markup.
    const auto text = [&](size_t i) {
      if (!format.markup) return list[i].text;
      return tandem::markup::restore(marked[line], list[i].text, attention[line][i]);
    };
    if (!nbest) {
      out << text(0);
      if (format.alignments) out << '\t' << word_alignment(source_words[line], list.front());
      out << '\n';
    }
    for (size_t i = 0; nbest && i < list.size(); ++i) {
      char score[32];
      std::snprintf(score, sizeof score, "%.6f", list[i].normalized);
      out << index << " ||| " << text(i) << " ||| " << score;
      if (format.alignments) out << " ||| " << word_alignment(source_words[line], list[i]);
      out << '\n';
    }
    ++index;
  }
  return out.str();
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

struct Args {
  tandem::cli::ModelFlags models;
  tandem::decode::DecodeOptions options;
  tandem::bulk::ChunkedJob chunked;          // --chunk-lines, --progress-s, --timeout-s
  const CLI::Option* chunk_lines = nullptr;  // whether --chunk-lines was given
  tandem::cli::LanguageFlags languages;
  tandem::cli::AlignmentFlags alignments;
  std::string sampling;  // --sampling as given
  bool nbest = false;    // --nbest was given: INDEX ||| TRANSLATION ||| SCORE lines
  bool json = false;     // --json-input
  bool markup = false;   // --markup
  std::string shortlist;  // --shortlist
  std::string input, output;
  tandem::jobs::LaunchFlags launch;
};

// --input, --output and the file job's other flags, with the launcher's.
void add_file_flags(CLI::App& app, Args& args) {
  auto* input = app.add_option("--input", args.input,
                               "translate this file instead of standard input, in chunks "
                               "(with --output; see below)");
  auto* output = app.add_option("--output", args.output,
                                "where --input's translation goes; OUTPUT.parts/ holds the "
                                "finished chunks until it is whole");
  input->needs(output);
  output->needs(input);
  args.chunk_lines = tandem::bulk::add_chunk_flags(
      app, args.chunked,
      "lines per chunk: with --input, what a rank translates at a time and a resume redoes at most",
      "from standard input, lines read before translating and writing them (default 500 per "
      "thread)");
  tandem::jobs::add_launch_flags(app, args.launch, "one per GPU, or per --threads cores",
                                  "its finished chunks");
}

LineFormat line_format(const Args& args, const tandem::data::Vocab& vocab) {
  return {tandem::cli::language_marks(vocab, args.languages), args.json, args.nbest,
          args.alignments.on(), args.markup};
}

// With --json-input or --markup and --input, every line of the input read before any is
// translated (a bad one is std::invalid_argument naming the file and its line), so that a job
// never stops half-way on one: by the launcher or the one process, not by every rank (only rank
// 0 reads the input,
// which need not be on the other ranks' machines; under your own mpirun a bad line stops the job
// at its chunk, naming the line, with no output written).
void check_input(const Args& args, const tandem::data::Vocab& vocab) {
  if ((!args.json && !args.markup) || args.input.empty() || tandem::jobs::started_as_rank()) {
    return;
  }
  const auto lines = tandem::cli::read_lines(args.input, "--input");
  try {
    const auto input = tandem::cli::read_input_lines(lines, args.json, vocab, 1);
    if (args.markup) marked_lines(input.texts, 1);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--input " + args.input + ": " + e.what());
  }
}

// --shortlist, read and checked against the model's vocabulary, into args.options.
void load_shortlist(Args& args, const tandem::data::Vocab& vocab) {
  if (args.shortlist.empty()) return;
  auto shortlist = std::make_shared<const tandem::data::Shortlist>(
      tandem::data::Shortlist::load(args.shortlist));
  if (!shortlist->built_on(vocab)) {
    throw std::invalid_argument("--shortlist " + args.shortlist + " was built on another "
                                "vocabulary than " + args.models.checkpoints.front() +
                                "'s (tandem-shortlist on the corpus the model was trained on)");
  }
  args.options.shortlist = std::move(shortlist);
}

// What must hold of the options, in every mode, before any model is loaded.
void check_options(const CLI::App& app, Args& args) {
  if (args.options.nbest > args.options.beam_size) {
    throw std::invalid_argument("--nbest " + std::to_string(args.options.nbest) +
                                " exceeds --beam " + std::to_string(args.options.beam_size) +
                                ": an n-best list holds at most beam size hypotheses");
  }
  if (!args.sampling.empty()) apply_sampling(app, args.sampling, args.options);
  if (!args.json && args.shortlist.empty() && !args.alignments.on() && !args.markup) return;
  // The first checkpoint's vocabulary and config, read without its tensors.
  const auto first = tandem::checkpoint::load_description(args.models.checkpoints.front());
  const auto vocab = tandem::data::Vocab::from_bytes(first.vocab);
  check_input(args, vocab);
  load_shortlist(args, vocab);
  if (args.alignments.on() || args.markup) {  // the tags go where the alignment heads say
    const auto config = tandem::config::parse_config(
        first.config_yaml, args.models.checkpoints.front() + " /config");
    args.options.alignment = tandem::cli::alignment_heads(args.alignments, config);
  }
}

// What shapes the output of a file job, for its record: every option but the threads and ranks.
std::vector<std::pair<std::string, std::string>> recorded_options(const Args& args) {
  using tandem::cli::recorded_number;
  const auto& o = args.options;
  auto options = tandem::cli::recorded_model_options(args.models);
  options.insert(options.end(), {{"--beam", std::to_string(o.beam_size)},
                                 {"--lenpen", recorded_number(o.length_penalty)},
                                 {"--batch-tokens", std::to_string(o.batch_tokens)},
                                 {"--max-len-a", recorded_number(o.max_len_a)},
                                 {"--max-len-b", std::to_string(o.max_len_b)},
                                 {"--min-len", std::to_string(o.min_len)}});
  if (args.nbest) options.emplace_back("--nbest", std::to_string(o.nbest));
  if (args.json) options.emplace_back("--json-input", "yes");
  if (args.markup) options.emplace_back("--markup", "yes");
  if (o.shortlist) options.emplace_back("--shortlist", tandem::hash_text(o.shortlist->fingerprint()));
  if (!args.sampling.empty()) {
    options.insert(options.end(), {{"--sampling", args.sampling},
                                   {"--temperature", recorded_number(o.sampling.temperature)},
                                   {"--seed", std::to_string(o.sampling.seed)}});
  }
  for (auto& option : tandem::cli::recorded_language_options(args.languages)) {
    options.push_back(std::move(option));
  }
  if (o.alignment) {
    for (auto& option : tandem::cli::recorded_alignment_options(args.alignments, *o.alignment)) {
      options.push_back(std::move(option));
    }
  }
  return options;
}

// What a rank of a file job does with each chunk: its models loaded on its device.
tandem::bulk::ChunkFunction chunk_translator(const Args& args,
                                             tandem::parallel::ProcessGroup& group) {
  tandem::cli::ModelFlags flags = args.models;
  flags.device = tandem::cli::rank_device(flags.device, group.local_rank(), group.local_size());
  tandem::decode::DecodeOptions options = args.options;
  auto models = std::make_shared<tandem::checkpoint::InferenceEnsemble>(
      tandem::cli::load_models(flags, options));
  const LineFormat format = line_format(args, models->members.front().vocab);
  return [models, format, options](const tandem::bulk::Chunk& chunk) {
    return translate_lines(*models, chunk.columns.front(), options, format, chunk.first_line);
  };
}

// Standard input to standard output, a chunk of lines at a time, so that output streams while
// input is still arriving.
int decode_stream(Args& args) {
  const auto models = tandem::cli::load_models(args.models, args.options);
  const LineFormat format = line_format(args, models.members.front().vocab);
  // Enough batches in a chunk for every thread to have some.
  const auto chunk_lines = static_cast<size_t>(
      args.chunk_lines->count() > 0 ? args.chunked.chunk_lines : 500 * args.options.threads);
  std::vector<std::string> lines;
  int64_t next_index = 0;
  const auto flush = [&] {
    std::cout << translate_lines(models, lines, args.options, format, next_index);
    std::cout.flush();
    next_index += static_cast<int64_t>(lines.size());
    lines.clear();
  };
  for (std::string line; std::getline(std::cin, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    if (lines.size() >= chunk_lines) flush();
  }
  if (!lines.empty()) flush();
  return 0;
}

tandem::bulk::ChunkedJob chunked_job(const Args& args) {
  tandem::bulk::ChunkedJob job = args.chunked;
  job.tool = "tandem-decode";
  job.inputs = {{"--input", args.input}};
  job.output = args.output;
  job.checkpoints = args.models.checkpoints;
  job.options = recorded_options(args);
  return job;
}

// The tool as its flags describe it; `args` must outlive it.
tandem::bulk::FileTool file_tool(Args& args) {
  return {chunked_job(args),
          args.launch,
          args.models.threads,
          args.models.device,
          {"--input and --output", "translate a file",
           "the ranks share a file, not standard input"},
          [&args](tandem::parallel::ProcessGroup& group) { return chunk_translator(args, group); },
          [&args] { return decode_stream(args); }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Translate standard input, or a file in resumable chunks on N ranks, with a Tandem "
      "checkpoint (beam search or sampling, batched; in order)."};
  Args args;
  tandem::cli::add_model_flags(app, args.models)->required();
  tandem::cli::add_decode_flags(app, args.options);
  auto* nbest = app.add_option("--nbest", args.options.nbest,
                               "write the N best translations per line, as INDEX ||| TRANSLATION "
                               "||| SCORE (N <= --beam)")
                    ->check(tandem::cli::kPositive);
  tandem::cli::add_language_flags(app, args.languages);
  auto* json = app.add_flag("--json-input", args.json,
                            "read each line as JSON: {\"text\": ..., \"constraints\": [phrases "
                            "every translation contains], \"avoid\": [phrases none contains]} "
                            "(Sockeye's form; see below)");
  add_sampling_flags(app, args.sampling, args.options.sampling);
  json->excludes("--sampling");
  tandem::cli::add_alignment_flags(app, args.alignments,
                                   "after the translation, tab-separated (with --nbest, a fourth "
                                   "field of each entry)");
  app.add_flag("--markup", args.markup,
               "lines hold inline XML/HTML tags and entities: translate the text alone and put "
               "each tag back by the word alignment (see below)");
  app.add_option("--shortlist", args.shortlist,
                 "a lexical shortlist (tandem-shortlist): each batch's output layer scores only "
                 "the target pieces its source pieces' lists and the frequent ones give");
  add_file_flags(app, args);
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-decode", argc, argv, [&] {
        tandem::jobs::check_launch_flags(args.launch);
        tandem::bulk::check_file_tool(file_tool(args));
      })) {
    return *done;
  }
  args.nbest = nbest->count() > 0;
  const int checked = tandem::cli::run_tool("tandem-decode", [&] {
    check_options(app, args);
    return 0;
  });
  if (checked != 0) return checked;
  return tandem::bulk::run_file_tool(argc, argv, file_tool(args));
}
