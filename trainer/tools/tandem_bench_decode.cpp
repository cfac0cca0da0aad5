// tandem-bench-decode: decoding speed of one checkpoint on one input file, measured in one run for
//   seeds   the seeds' algorithm: greedy, batches of 32 in input order, the whole decoder re-run
//           over the full prefix at every step (no cache);
//   beam 1  Tandem's cached incremental decoding, length-sorted batches (what tandem-decode does);
//   beam K  the same with beam search.
// Prints target tokens/s (generated tokens, EOS excluded) for each, the ratios, and one JSON line.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "trainer/common/error.h"
#include "trainer/decode/translate.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/cpu_runtime.h"
#include "trainer/train/model_io.h"

namespace {

using Clock = std::chrono::steady_clock;

constexpr const char* kExamples = R"(Example:
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en --threads 1)";

// src + EOS rows [begin, end) padded → [rows, longest + 1].
torch::Tensor source_batch(const std::vector<std::vector<int32_t>>& sources, size_t begin, size_t end) {
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
int64_t seeds_greedy(tandem::model::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
                     const tandem::decode::DecodeOptions& options) {
  torch::NoGradGuard no_grad;
  int64_t generated = 0;
  for (size_t begin = 0; begin < sources.size(); begin += 32) {
    const size_t end = std::min(sources.size(), begin + 32);
    auto src = source_batch(sources, begin, end);
    auto memory = model->encode(src);
    const auto src_len = src.ne(tandem::kPadId).sum(1).max().item<int64_t>();
    const int64_t limit = std::min<int64_t>(
        static_cast<int64_t>(options.max_len_a * src_len) + options.max_len_b,
        model->options().max_positions - 1);
    auto prefix = torch::full({src.size(0), 1}, tandem::kBosId, torch::kLong);
    auto done = torch::zeros({src.size(0)}, torch::kBool);
    for (int64_t step = 0; step < limit && !done.all().item<bool>(); ++step) {
      auto next = model->decode(prefix, memory, src).select(1, -1).argmax(-1);
      generated += (~done & next.ne(tandem::kEosId)).sum().item<int64_t>();
      done |= next.eq(tandem::kEosId);
      prefix = torch::cat({prefix, next.unsqueeze(1)}, 1);
    }
  }
  return generated;
}

int64_t cached(tandem::model::Transformer& model, const std::vector<std::vector<int32_t>>& sources,
               const tandem::decode::DecodeOptions& options) {
  int64_t generated = 0;
  for (const auto& h : tandem::decode::translate(model, sources, options)) generated += h.tokens.size();
  return generated;
}

struct Timing {
  int64_t tokens = 0;
  double seconds = 0;
  double per_second() const { return seconds > 0 ? tokens / seconds : 0; }
};

template <class F>
Timing timed(F&& run) {
  const auto start = Clock::now();
  Timing t;
  t.tokens = run();
  t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Decoding speed: the seeds' uncached greedy decoder vs Tandem's cached beam search."};
  std::string checkpoint, input;
  int threads = 1;
  int64_t beam = 5;
  size_t max_lines = 0;
  tandem::decode::DecodeOptions options;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (*.h5)")->required();
  app.add_option("--input", input, "source sentences, one per line")->required();
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str();
  app.add_option("--beam-k", beam, "the beam size measured besides beam 1")->capture_default_str();
  app.add_option("--max-lines", max_lines, "use the first N lines; 0 = all")->capture_default_str();
  app.footer(kExamples);
  app.failure_message(tandem::tools::usage_error_line("tandem-bench-decode"));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : tandem::kExitUsage;
  }
  return tandem::tools::run_tool("tandem-bench-decode", [&] {
    tandem::train::configure_cpu_runtime({threads});
    auto m = tandem::train::load_for_inference(checkpoint);
    auto lines = tandem::tools::read_lines(input, "--input");
    if (max_lines > 0 && lines.size() > max_lines) lines.resize(max_lines);
    std::vector<std::vector<int32_t>> sources;
    for (const auto& line : lines) sources.push_back(m.vocab.encode(line));
    const auto seeds = timed([&] { return seeds_greedy(m.model, sources, options); });
    options.beam_size = 1;
    const auto greedy = timed([&] { return cached(m.model, sources, options); });
    options.beam_size = beam;
    const auto wide = timed([&] { return cached(m.model, sources, options); });
    std::printf("%zu sentences, %d thread(s)\n", sources.size(), threads);
    std::printf("seeds (uncached greedy, batch 32): %8.1f target tokens/s\n", seeds.per_second());
    std::printf("tandem beam 1:                     %8.1f target tokens/s  (%.1fx the seeds)\n",
                greedy.per_second(), greedy.per_second() / seeds.per_second());
    std::printf("tandem beam %-2lld                     %8.1f target tokens/s\n",
                static_cast<long long>(beam), wide.per_second());
    nlohmann::json record{{"sentences", sources.size()}, {"threads", threads},
                          {"seeds_tokens_per_s", seeds.per_second()},
                          {"beam1_tokens_per_s", greedy.per_second()},
                          {"beam_k", beam}, {"beamk_tokens_per_s", wide.per_second()},
                          {"beam1_vs_seeds", greedy.per_second() / seeds.per_second()}};
    std::printf("%s\n", record.dump().c_str());
    return 0;
  });
}
