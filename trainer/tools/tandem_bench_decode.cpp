// tandem-bench-decode: decoding speed of one checkpoint on one input file, measured in one run for
// every precision of --precisions (fp32 and int8 by default), every beam size of --beams (1 and 5)
// and every thread count of --threads (1 and 2), as
// tandem-decode decodes (cached incremental decoding, length-sorted batches, one intra-op thread
// per decoding thread); with --seeds also the seeds' algorithm: greedy, batches of 32 in input
// order, the whole decoder re-run over the full prefix at every step (no cache).
// Prints for each the median wall time of --repeat runs with that run's user and system CPU
// seconds, output words/s (whitespace-separated words of the detokenized translations), target
// tokens/s (generated tokens, EOS excluded) and, given --ref, BLEU; then each thread count's
// speed-up over the first, each precision's over the first, and one JSON line with the figures.
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "trainer/common/error.h"
#include "trainer/decode/translate.h"
#include "trainer/tools/decode_flags.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/cpu_runtime.h"
#include "trainer/train/device.h"
#include "trainer/train/metrics.h"
#include "trainer/train/model_io.h"

namespace {

using Clock = std::chrono::steady_clock;
using Sentences = std::vector<std::vector<int32_t>>;

constexpr const char* kExamples = R"(Examples:
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en --ref work/bible/test.es
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en --beams 1 4 --threads 1)";

// src + EOS rows [begin, end) padded → [rows, longest + 1].
torch::Tensor source_batch(const Sentences& sources, size_t begin, size_t end) {
  size_t longest = 0;
  for (size_t i = begin; i < end; ++i) longest = std::max(longest, sources[i].size());
  auto batch = torch::full({static_cast<int64_t>(end - begin), static_cast<int64_t>(longest + 1)},
                           tandem::kPadId, torch::kLong);
  for (size_t i = begin; i < end; ++i) {
    for (size_t t = 0; t < sources[i].size(); ++t) batch[i - begin][t] = sources[i][t];
    batch[i - begin][sources[i].size()] = tandem::kEosId;
  }
  return batch;
}

// The seeds' decoder: every step feeds the whole prefix through model->decode and keeps the last
// position's argmax; finished rows keep being computed until the batch is done.
Sentences seeds_greedy(tandem::model::Transformer& model, const Sentences& sources,
                       const tandem::decode::DecodeOptions& options) {
  torch::NoGradGuard no_grad;
  Sentences outputs;
  for (size_t begin = 0; begin < sources.size(); begin += 32) {
    const size_t end = std::min(sources.size(), begin + 32);
    auto src = source_batch(sources, begin, end).to(model->parameters().front().device());
    auto memory = model->encode(src);
    const auto src_len = src.ne(tandem::kPadId).sum(1).max().item<int64_t>();
    const int64_t limit =
        std::min<int64_t>(static_cast<int64_t>(options.max_len_a * src_len) + options.max_len_b,
                          model->options().max_positions - 1);
    auto prefix = torch::full({src.size(0), 1}, tandem::kBosId, src.options());
    auto done = torch::zeros({src.size(0)}, src.options().dtype(torch::kBool));
    for (int64_t step = 0; step < limit && !done.all().item<bool>(); ++step) {
      auto next = model->decode(prefix, memory, src).select(1, -1).argmax(-1);
      done |= next.eq(tandem::kEosId);
      prefix = torch::cat({prefix, next.unsqueeze(1)}, 1);
    }
    prefix = prefix.cpu();
    for (int64_t row = 0; row < prefix.size(0); ++row) {
      std::vector<int32_t> tokens;
      for (int64_t t = 1; t < prefix.size(1) && prefix[row][t].item<int64_t>() != tandem::kEosId;
           ++t) {
        tokens.push_back(static_cast<int32_t>(prefix[row][t].item<int64_t>()));
      }
      outputs.push_back(std::move(tokens));
    }
  }
  return outputs;
}

Sentences cached(const tandem::decode::Ensemble& model, const Sentences& sources,
                 const tandem::decode::DecodeOptions& options) {
  Sentences outputs;
  for (auto& h : tandem::decode::translate(model, sources, options)) {
    outputs.push_back(std::move(h.tokens));
  }
  return outputs;
}

double cpu_seconds(const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; }

struct Timing {
  int64_t tokens = 0;
  int64_t words = 0;
  double wall = 0, user = 0, sys = 0;
  std::vector<std::string> text;  // the detokenized translations
  double words_per_second() const { return wall > 0 ? words / wall : 0; }
  double tokens_per_second() const { return wall > 0 ? tokens / wall : 0; }
  nlohmann::json json() const {
    return {{"wall_s", wall},
            {"user_s", user},
            {"sys_s", sys},
            {"words", words},
            {"tokens", tokens},
            {"words_per_s", words_per_second()},
            {"tokens_per_s", tokens_per_second()}};
  }
};

// `repeat` runs of decode(); the one with the median wall time.
template <class Decode>
Timing timed(const tandem::data::Vocab& vocab, int repeat, Decode&& decode) {
  std::vector<Timing> runs;
  for (int i = 0; i < repeat; ++i) {
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    const auto start = Clock::now();
    const Sentences outputs = decode();
    Timing t;
    t.wall = std::chrono::duration<double>(Clock::now() - start).count();
    getrusage(RUSAGE_SELF, &after);
    t.user = cpu_seconds(after.ru_utime) - cpu_seconds(before.ru_utime);
    t.sys = cpu_seconds(after.ru_stime) - cpu_seconds(before.ru_stime);
    for (const auto& tokens : outputs) {
      t.tokens += static_cast<int64_t>(tokens.size());
      t.text.push_back(vocab.decode(tokens));
      std::istringstream text(t.text.back());
      for (std::string word; text >> word;) ++t.words;
    }
    runs.push_back(t);
  }
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.wall < b.wall; });
  return runs[runs.size() / 2];
}

void print_row(const std::string& name, const Timing& t, const std::string& bleu) {
  std::printf("%-22s %8.2f %8.2f %7.2f %9.1f %10.1f %7s\n", name.c_str(), t.wall, t.user, t.sys,
              t.words_per_second(), t.tokens_per_second(), bleu.c_str());
}

// One measured configuration.
struct Row {
  std::string precision;
  int threads = 1;
  int64_t beam = 1;
  Timing timing;
  double bleu = -1;  // -1: no references
  std::string name() const {
    return precision + ", beam " + std::to_string(beam) + ", " + std::to_string(threads) +
           " thread" + (threads > 1 ? "s" : "");
  }
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Decoding speed of a checkpoint: beam sizes x thread counts (and the seeds' decoder)."};
  std::string checkpoint, input, ref;
  std::vector<int> thread_counts = {1, 2};
  std::vector<int64_t> beams = {1, 5};
  std::vector<std::string> precisions = {"fp32", "int8"};
  int repeat = 1;
  size_t max_lines = 0;
  bool seeds = false;
  std::string device_flag = "cpu";
  tandem::decode::DecodeOptions options;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (*.h5)")->required();
  app.add_option("--input", input, "source sentences, one per line")->required();
  app.add_option("--ref", ref, "reference translations of --input, for the BLEU of each row");
  app.add_option("--threads", thread_counts,
                 "decoding thread counts to measure (one intra-op thread each)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--precisions", precisions,
                 "precisions to measure: fp32, and int8 (tandem-decode --precision int8)")
      ->check(CLI::IsMember({"fp32", "int8"}))
      ->capture_default_str();
  app.add_option("--beams", beams, "beam sizes to measure")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--batch-tokens", options.batch_tokens, "source tokens per decoding batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--repeat", repeat, "runs per row; the median wall time is reported")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--max-lines", max_lines, "use the first N lines; 0 = all")->capture_default_str();
  app.add_flag("--seeds", seeds, "also time the seeds' uncached greedy decoder (slow)");
  tandem::tools::add_device_flag(app, device_flag);
  app.footer(kExamples);
  app.failure_message(tandem::tools::usage_error_line("tandem-bench-decode"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : tandem::kExitUsage;
  }
  return tandem::tools::run_tool("tandem-bench-decode", [&] {
    const torch::Device device = tandem::train::inference_device(device_flag);
    // int8 is a CPU precision: on a GPU the default list is fp32 alone, and asking for int8 fails.
    if (!device.is_cpu() && app.count("--precisions") == 0) precisions = {"fp32"};
    for (const auto& precision : precisions) tandem::tools::check_precision_on(precision, device);
    tandem::train::configure_cpu_runtime({1, 0, tandem::train::Workload::kDecoding});
    auto m = tandem::train::load_for_inference(checkpoint);
    m.model->to(device);  // the seeds' decoder's model: on the parameters, as the seeds ran
    auto lines = tandem::tools::read_lines(input, "--input");
    if (max_lines > 0 && lines.size() > max_lines) lines.resize(max_lines);
    std::vector<std::string> refs;
    if (!ref.empty()) {
      refs = tandem::tools::read_lines(ref, "--ref");
      if (refs.size() < lines.size()) {
        throw std::invalid_argument("--ref '" + ref + "' has " + std::to_string(refs.size()) +
                                    " lines but --input has " + std::to_string(lines.size()));
      }
      refs.resize(lines.size());
    }
    Sentences sources;
    for (const auto& line : lines) sources.push_back(m.vocab.encode(line));
    std::vector<Row> rows;  // precision-major, then thread counts, then beams
    for (const auto& precision : precisions) {
      // Each precision prepares a model of its own (tandem-decode --precision).
      auto model = tandem::train::load_for_inference(checkpoint).model;
      tandem::tools::place_model(model, precision, device);
      for (const int threads : thread_counts) {
        for (const int64_t beam : beams) {
          Row row;
          row.precision = precision;
          row.threads = threads;
          row.beam = beam;
          options.threads = threads;
          options.beam_size = beam;
          row.timing = timed(m.vocab, repeat, [&] { return cached(model, sources, options); });
          if (!refs.empty()) row.bleu = tandem::train::corpus_bleu(row.timing.text, refs).score;
          rows.push_back(std::move(row));
        }
      }
    }
    std::printf("%zu sentences, median of %d run(s)\n", sources.size(), repeat);
    std::printf("%-22s %8s %8s %7s %9s %10s %7s\n", "decoder", "wall s", "user s", "sys s",
                "words/s", "tokens/s", "BLEU");
    nlohmann::json record{
        {"sentences", sources.size()}, {"repeat", repeat}, {"device", device.str()}, {"rows", {}}};
    std::printf("on %s\n", device.str().c_str());
    for (const auto& row : rows) {
      char bleu[16] = "-";
      if (row.bleu >= 0) std::snprintf(bleu, sizeof bleu, "%.2f", row.bleu);
      print_row(row.name(), row.timing, bleu);
      auto entry = row.timing.json();
      entry["precision"] = row.precision;
      entry["threads"] = row.threads;
      entry["beam"] = row.beam;
      if (row.bleu >= 0) entry["bleu"] = row.bleu;
      record["rows"].push_back(entry);
    }
    // Each thread count against the first, and each precision against the first, row by row.
    const size_t per_precision = thread_counts.size() * beams.size();
    for (size_t p = 0; p < precisions.size(); ++p) {
      for (size_t t = 1; t < thread_counts.size(); ++t) {
        for (size_t b = 0; b < beams.size(); ++b) {
          const auto& base = rows[p * per_precision + b].timing;
          const auto& more = rows[p * per_precision + t * beams.size() + b].timing;
          std::printf("%s, beam %lld: %d threads decode %.2fx the target tokens/s of %d\n",
                      precisions[p].c_str(), static_cast<long long>(beams[b]), thread_counts[t],
                      more.tokens_per_second() / base.tokens_per_second(), thread_counts[0]);
        }
      }
    }
    for (size_t p = 1; p < precisions.size(); ++p) {
      for (size_t i = 0; i < per_precision; ++i) {
        const auto& base = rows[i];
        const auto& other = rows[p * per_precision + i];
        std::printf("beam %lld, %d thread(s): %s decodes %.2fx the target tokens/s of %s",
                    static_cast<long long>(base.beam), base.threads, precisions[p].c_str(),
                    other.timing.tokens_per_second() / base.timing.tokens_per_second(),
                    precisions[0].c_str());
        if (base.bleu >= 0) std::printf(", BLEU %+.2f", other.bleu - base.bleu);
        std::printf("\n");
      }
    }
    if (seeds) {
      options.threads = 1;
      options.beam_size = 1;
      const auto slow =
          timed(m.vocab, repeat, [&] { return seeds_greedy(m.model, sources, options); });
      print_row("seeds (1 thread)", slow, "-");
      for (const auto& row : rows) {
        if (row.beam != 1 || row.threads != 1) continue;
        std::printf("beam 1 is %.1fx the seeds' greedy decoder\n",
                    row.timing.tokens_per_second() / slow.tokens_per_second());
      }
      record["seeds"] = slow.json();
    }
    std::printf("%s\n", record.dump().c_str());
    return 0;
  });
}
