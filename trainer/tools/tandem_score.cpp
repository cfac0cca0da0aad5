// tandem-score: the log-probability a checkpoint (or an ensemble) gives each target line given its
// source line (forced decoding): total, per token and length-normalised, one line per pair in
// input order; to standard output, or a file in resumable chunks on N ranks and nodes. What dual
// cross-entropy filtering (Junczys-Dowmunt, 2018) and n-best reranking read.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "trainer/bulk/chunked_tool.h"
#include "trainer/bulk/line_chunks.h"
#include "trainer/cli/alignment_flags.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/language_flags.h"
#include "trainer/checkpoint/checkpoint.h"
#include "trainer/cli/tool_main.h"
#include "data/vocab/words.h"
#include "trainer/eval/evaluate.h"
#include "trainer/model_io/model_io.h"
#include "trainer/runtime/cpu_runtime.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-score --checkpoint runs/tiny/last.h5 --src test.en --tgt test.es > scores.tsv
  tandem-score --checkpoint a.h5 --checkpoint b.h5 --src crawl.en --tgt crawl.es \
    --output crawl.scores --ranks 2 --max-restarts 2        # an ensemble, a file in chunks
  tandem-score --checkpoint nllb.h5 --source-lang eng_Latn --target-lang spa_Latn \
    --src crawl.en --tgt crawl.es --output crawl.scores --hostfile hosts
  tandem-score --checkpoint runs/aligned/last.h5 --src test.en --tgt test.es --alignments | \
    cut -f5 > test.align                                    # forced alignment of a corpus

Each pair gives one line of four tab-separated fields:
  TOTAL  TOKENS  PER_TOKEN  NORMALIZED
TOTAL is the sum of the target's token log-probabilities (natural log, EOS included; with
language codes, the target's code too), TOKENS their count, PER_TOKEN = TOTAL / TOKENS, and
NORMALIZED = TOTAL / TOKENS^lenpen (tandem-decode's ranking of hypotheses, --lenpen as there).
Summed over a test split, TOTAL is minus tandem-eval's loss times its tokens. With --alignments
a fifth field holds the pair's word alignment (Pharaoh i-j), each target piece linked to the
source piece the alignment heads attended to most as they predicted it: forced alignment.
With --output, the pairs are cut into chunks of --chunk-lines lines, kept in OUTPUT.parts/ until
OUTPUT is whole; the same command run again resumes at the first unfinished chunk.)";

struct Args {
  tandem::cli::ModelFlags models;
  std::string src, tgt, output;
  tandem::cli::LanguageFlags languages;
  tandem::cli::AlignmentFlags alignments;
  std::optional<tandem::model::AlignmentHeads> alignment;  // resolved from the flags
  int64_t max_tokens = 4096;
  double length_penalty = 0.6;
  tandem::bulk::ChunkedJob chunked;  // --chunk-lines, --progress-s, --timeout-s
  tandem::jobs::LaunchFlags launch;
};

void declare_options(CLI::App& app, Args& args) {
  tandem::cli::add_model_flags(app, args.models, tandem::cli::Task::kScore)->required();
  app.add_option("--src", args.src, "source sentences, one per line")->required();
  app.add_option("--tgt", args.tgt, "the target sentences to score, one per source line")
      ->required();
  app.add_option("--output", args.output,
                 "write the scores here, in resumable chunks (OUTPUT.parts/ holds the finished "
                 "ones); default: standard output");
  tandem::cli::add_language_flags(app, args.languages, tandem::cli::Task::kScore);
  app.add_option("--max-tokens", args.max_tokens, "padded tokens per batch")
      ->capture_default_str()
      ->check(tandem::cli::kPositive);
  app.add_option("--lenpen", args.length_penalty,
                 "alpha of NORMALIZED = TOTAL / TOKENS^alpha (tandem-decode's --lenpen)")
      ->capture_default_str();
  tandem::cli::add_alignment_flags(app, args.alignments,
                                   "as a fifth field (forced alignment: the given target's)");
  tandem::bulk::add_chunk_flags(
      app, args.chunked,
      "pairs per chunk: what a rank scores at a time and a resume redoes at most");
  tandem::jobs::add_launch_flags(app, args.launch, "one per GPU, or per --threads cores",
                                  "its finished chunks");
  app.footer(kExamples);
}

// "TOTAL\tTOKENS\tPER_TOKEN\tNORMALIZED" for one pair (without a line end).
std::string score_line(const tandem::eval::SentenceScore& score, double length_penalty) {
  const double tokens = static_cast<double>(score.tokens);
  char line[96];
  std::snprintf(line, sizeof line, "%.6f\t%lld\t%.6f\t%.6f", score.total,
                static_cast<long long>(score.tokens), tokens > 0 ? score.total / tokens : 0.0,
                tokens > 0 ? score.total / std::pow(tokens, length_penalty) : 0.0);
  return line;
}

// A chunk's pairs as the model reads them, and with alignments each side's word per token.
struct ChunkPairs {
  std::vector<tandem::data::SentencePair> pairs;
  std::vector<std::vector<int32_t>> source_words, target_words;
};

ChunkPairs chunk_pairs(const tandem::bulk::Chunk& chunk, const tandem::data::Vocab& vocab,
                       const tandem::data::LanguageMarks& marks, bool words) {
  ChunkPairs out;
  const size_t count = chunk.columns[0].size();
  out.source_words.resize(words ? count : 0);
  out.target_words.resize(words ? count : 0);
  for (size_t i = 0; i < count; ++i) {
    const auto& src = chunk.columns[0][i];
    const auto& tgt = chunk.columns[1][i];
    if (words) {
      out.pairs.push_back({marks.source(vocab, src, &out.source_words[i]),
                           marks.target(vocab, tgt, &out.target_words[i])});
    } else {
      out.pairs.push_back({marks.source(vocab, src), marks.target(vocab, tgt)});
    }
  }
  return out;
}

// What a rank (or the only process) does with each chunk of pairs: its models loaded on `device`.
tandem::bulk::ChunkFunction chunk_scorer(const Args& args, const std::string& device) {
  tandem::cli::ModelFlags flags = args.models;
  flags.device = device;
  tandem::decode::DecodeOptions options;
  auto models = std::make_shared<tandem::checkpoint::InferenceEnsemble>(
      tandem::cli::load_models(flags, options));
  // One batch at a time: its matrix products take the threads.
  tandem::runtime::configure_cpu_runtime(
      {static_cast<int>(options.threads), 0, tandem::runtime::Workload::kDecoding});
  const auto marks = tandem::cli::language_marks(models->members.front().vocab, args.languages);
  const int64_t max_tokens = args.max_tokens;
  const double length_penalty = args.length_penalty;
  const auto alignment = args.alignment;
  return [models, marks, max_tokens, length_penalty, alignment](const tandem::bulk::Chunk& chunk) {
    const auto& vocab = models->members.front().vocab;
    const ChunkPairs in = chunk_pairs(chunk, vocab, marks, alignment.has_value());
    const auto scores = tandem::eval::sentence_scores(models->ensemble, in.pairs, max_tokens);
    std::vector<tandem::eval::AttentionRows> attention;
    if (alignment) {
      attention =
          tandem::eval::forced_attention(models->ensemble, in.pairs, max_tokens, *alignment);
    }
    std::string text;
    for (size_t i = 0; i < scores.size(); ++i) {
      text += score_line(scores[i], length_penalty);
      if (alignment) {
        text += '\t' + tandem::data::pharaoh(
                            tandem::data::word_links(in.source_words[i], in.target_words[i],
                                                     tandem::eval::most_attended(attention[i])));
      }
      text += '\n';
    }
    return text;
  };
}

tandem::bulk::ChunkedJob chunked_job(const Args& args) {
  tandem::bulk::ChunkedJob job = args.chunked;
  job.tool = "tandem-score";
  job.inputs = {{"--src", args.src}, {"--tgt", args.tgt}};
  job.output = args.output;
  job.checkpoints = args.models.checkpoints;
  job.options = tandem::cli::recorded_model_options(args.models);
  job.options.insert(job.options.end(),
                     {{"--max-tokens", std::to_string(args.max_tokens)},
                      {"--lenpen", tandem::cli::recorded_number(args.length_penalty)}});
  if (args.alignment) {
    for (auto& option : tandem::cli::recorded_alignment_options(args.alignments, *args.alignment)) {
      job.options.push_back(std::move(option));
    }
  }
  for (auto& option : tandem::cli::recorded_language_options(args.languages)) {
    job.options.push_back(std::move(option));
  }
  return job;
}

// To standard output, a chunk of pairs at a time.
int score_to_stdout(const Args& args, const tandem::bulk::ChunkedJob& job) {
  const auto files = tandem::bulk::job_files(job);
  const auto score = chunk_scorer(args, args.models.device);
  for (int64_t c = 0; c < files.inputs.front().count(); ++c) {
    tandem::bulk::Chunk chunk;
    chunk.index = c;
    chunk.first_line = files.inputs.front().first_line(c);
    for (const auto& input : files.inputs) chunk.columns.push_back(read_chunk(input, c));
    std::cout << score(chunk);
  }
  std::cout.flush();
  return 0;
}

// The tool as its flags describe it; `args` must outlive it.
tandem::bulk::FileTool file_tool(const Args& args) {
  tandem::bulk::ChunkedJob job = chunked_job(args);
  const auto load = [&args](tandem::parallel::ProcessGroup& group) {
    return chunk_scorer(args, tandem::cli::rank_device(args.models.device, group.local_rank(),
                                                         group.local_size()));
  };
  return {job,
          args.launch,
          args.models.threads,
          args.models.device,
          {"--output", "write a file", "the ranks share a file"},
          load,
          [&args, job] { return score_to_stdout(args, job); }};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Score target lines given their sources with a Tandem checkpoint or an ensemble (forced "
      "decoding): one line of log-probabilities per pair, in order."};
  Args args;
  declare_options(app, args);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-score", argc, argv, [&] {
        tandem::jobs::check_launch_flags(args.launch);
        tandem::bulk::check_file_tool(file_tool(args));
      })) {
    return *done;
  }
  if (args.alignments.on()) {  // the heads, from the first checkpoint's config
    const int checked = tandem::cli::run_tool("tandem-score", [&] {
      const std::string& first = args.models.checkpoints.front();
      const auto config = tandem::config::parse_config(
          tandem::checkpoint::load_description(first).config_yaml, first + " /config");
      args.alignment = tandem::cli::alignment_heads(args.alignments, config);
      return 0;
    });
    if (checked != 0) return checked;
  }
  return tandem::bulk::run_file_tool(argc, argv, file_tool(args));
}
