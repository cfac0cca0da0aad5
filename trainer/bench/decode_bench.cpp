// What tandem-bench-decode measures and prints; see decode_bench.h.
#include "trainer/bench/decode_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "trainer/bleu/bleu_chrf.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/tool_main.h"
#include "trainer/common/temp_dir.h"
#include "trainer/common/token_ids.h"
#include "trainer/kernels/cpu/cpu_path.h"
#include "trainer/model_io/model_io.h"
#include "trainer/runtime/cpu_runtime.h"
#include "trainer/runtime/device.h"

namespace tandem::bench {
namespace {

// src + EOS rows [begin, end) padded → [rows, longest + 1].
torch::Tensor source_batch(const Sentences& sources, size_t begin, size_t end) {
  size_t longest = 0;
  for (size_t i = begin; i < end; ++i) longest = std::max(longest, sources[i].size());
  auto batch = torch::full({static_cast<int64_t>(end - begin), static_cast<int64_t>(longest + 1)},
                           kPadId, torch::kLong);
  for (size_t i = begin; i < end; ++i) {
    for (size_t t = 0; t < sources[i].size(); ++t) batch[i - begin][t] = sources[i][t];
    batch[i - begin][sources[i].size()] = kEosId;
  }
  return batch;
}

// The seeds' decoder: every step feeds the whole prefix through model->decode and keeps the last
// position's argmax; finished rows keep being computed until the batch is done.
Sentences seeds_greedy(model::Transformer& model, const Sentences& sources,
                       const decode::DecodeOptions& options) {
  torch::NoGradGuard no_grad;
  Sentences outputs;
  for (size_t begin = 0; begin < sources.size(); begin += 32) {
    const size_t end = std::min(sources.size(), begin + 32);
    auto src = source_batch(sources, begin, end).to(model->parameters().front().device());
    auto memory = model->encode(src);
    const auto src_len = src.ne(kPadId).sum(1).max().item<int64_t>();
    const int64_t limit =
        std::min<int64_t>(static_cast<int64_t>(options.max_len_a * src_len) + options.max_len_b,
                          model->options().max_positions - 1);
    auto prefix = torch::full({src.size(0), 1}, kBosId, src.options());
    auto done = torch::zeros({src.size(0)}, src.options().dtype(torch::kBool));
    for (int64_t step = 0; step < limit && !done.all().item<bool>(); ++step) {
      auto next = model->decode(prefix, memory, src).select(1, -1).argmax(-1);
      done |= next.eq(kEosId);
      prefix = torch::cat({prefix, next.unsqueeze(1)}, 1);
    }
    prefix = prefix.cpu();
    for (int64_t row = 0; row < prefix.size(0); ++row) {
      std::vector<int32_t> tokens;
      for (int64_t t = 1; t < prefix.size(1) && prefix[row][t].item<int64_t>() != kEosId; ++t) {
        tokens.push_back(static_cast<int32_t>(prefix[row][t].item<int64_t>()));
      }
      outputs.push_back(std::move(tokens));
    }
  }
  return outputs;
}

Sentences cached(const decode::Ensemble& model, const Sentences& sources,
                 const decode::DecodeOptions& options) {
  Sentences outputs;
  for (auto& h : decode::translate(model, sources, options)) {
    outputs.push_back(std::move(h.tokens));
  }
  return outputs;
}

void print_row(const std::string& name, const Timing& t, const std::string& bleu) {
  std::printf("%-22s %8.2f %8.2f %7.2f %9.1f %10.1f %7s\n", name.c_str(), t.wall, t.user, t.sys,
              t.words_per_second(), t.tokens_per_second(), bleu.c_str());
}

// One measured configuration.
struct Row {
  std::string engine = "tandem";  // or "ctranslate2"
  std::string precision;
  int threads = 1;
  int64_t beam = 1;
  Timing timing;
  double bleu = -1;  // -1: no references
  std::string name() const {
    return (engine == "tandem" ? "" : "CT2 ") + precision + ", beam " + std::to_string(beam) +
           ", " + std::to_string(threads) + " thread" + (threads > 1 ? "s" : "");
  }
};

// The input's sentences, encoded, and their references (empty without --ref).
struct Inputs {
  Sentences sources;
  std::vector<std::string> refs;
};

Inputs read_inputs(const DecodeBenchOptions& o, const data::Vocab& vocab) {
  auto lines = cli::read_lines(o.input, "--input");
  if (o.max_lines > 0 && lines.size() > o.max_lines) lines.resize(o.max_lines);
  Inputs in;
  if (!o.ref.empty()) {
    in.refs = cli::read_lines(o.ref, "--ref");
    if (in.refs.size() < lines.size()) {
      throw std::invalid_argument("--ref '" + o.ref + "' has " + std::to_string(in.refs.size()) +
                                  " lines but --input has " + std::to_string(lines.size()));
    }
    in.refs.resize(lines.size());
  }
  for (const auto& line : lines) in.sources.push_back(vocab.encode(line, data::Side::kSource));
  return in;
}

// Every row: precision-major, then thread counts, then beams; with --ctranslate2 each Tandem row
// is followed by CTranslate2's. For each thread count and beam the runs take turns, a round at a
// time (fp32, CTranslate2 float32, int8, CTranslate2 int8, fp32, ...), so that a machine that
// speeds up or slows down meanwhile moves every row alike; each row is its median run.
std::vector<Row> measure_rows(DecodeBenchOptions& o, const torch::Device& device,
                              const data::Vocab& vocab, const Inputs& in) {
  const TempDir work("bench-decode");
  std::vector<model::Transformer> models;  // per precision
  for (const auto& precision : o.precisions) {
    // Each precision prepares a model of its own (tandem-decode --precision).
    models.push_back(checkpoint::load_for_inference(o.checkpoint).model);
    cli::place_model(models.back(), precision, device);
  }
  const bool ct2 = !o.ctranslate2.model_dir.empty();
  const size_t per_precision = o.thread_counts.size() * o.beams.size();
  std::vector<Row> tandem(o.precisions.size() * per_precision), ct2_rows(tandem.size());
  for (size_t t = 0; t < o.thread_counts.size(); ++t) {
    for (size_t b = 0; b < o.beams.size(); ++b) {
      o.decode.threads = o.thread_counts[t];
      o.decode.beam_size = o.beams[b];
      std::vector<std::function<Timing()>> runners;
      for (size_t p = 0; p < models.size(); ++p) {
        runners.push_back([&, p] {
          return timed_once(vocab, [&] { return cached(models[p], in.sources, o.decode); });
        });
        if (!ct2) continue;
        runners.push_back([&, p] {
          return timed_ctranslate2(o.ctranslate2, vocab, in.sources, o.precisions[p],
                                   static_cast<int>(o.decode.threads), o.decode,
                                   models[p]->options().max_positions, work.path());
        });
      }
      auto medians = alternating_medians(o.repeat, runners);
      const size_t per_run = ct2 ? 2 : 1;
      for (size_t p = 0; p < o.precisions.size(); ++p) {
        const size_t i = p * per_precision + t * o.beams.size() + b;
        Row& row = tandem[i];
        row.precision = o.precisions[p];
        row.threads = o.thread_counts[t];
        row.beam = o.beams[b];
        row.timing = std::move(medians[p * per_run]);
        if (!in.refs.empty()) row.bleu = eval::corpus_bleu(row.timing.text, in.refs).score;
        if (!ct2) continue;
        ct2_rows[i] = row;
        ct2_rows[i].engine = "ctranslate2";
        ct2_rows[i].timing = std::move(medians[p * per_run + 1]);
        if (!in.refs.empty()) {
          ct2_rows[i].bleu = eval::corpus_bleu(ct2_rows[i].timing.text, in.refs).score;
        }
      }
    }
  }
  std::vector<Row> rows;
  for (size_t i = 0; i < tandem.size(); ++i) {
    rows.push_back(std::move(tandem[i]));
    if (ct2) rows.push_back(std::move(ct2_rows[i]));
  }
  return rows;
}

// The table, and each row in `record`.
void print_rows(const std::vector<Row>& rows, nlohmann::json& record) {
  std::printf("%-22s %8s %8s %7s %9s %10s %7s\n", "decoder", "wall s", "user s", "sys s", "words/s",
              "tokens/s", "BLEU");
  std::printf("on %s (CPU kernels: fp32 %s, int8 %s)\n",
              record["device"].get<std::string>().c_str(),
              record["cpu_kernels"]["fp32"].get<std::string>().c_str(),
              record["cpu_kernels"]["int8"].get<std::string>().c_str());
  for (const auto& row : rows) {
    char bleu[16] = "-";
    if (row.bleu >= 0) std::snprintf(bleu, sizeof bleu, "%.2f", row.bleu);
    print_row(row.name(), row.timing, bleu);
    auto entry = row.timing.json();
    entry["engine"] = row.engine;
    entry["precision"] = row.precision;
    entry["threads"] = row.threads;
    entry["beam"] = row.beam;
    if (row.bleu >= 0) entry["bleu"] = row.bleu;
    record["rows"].push_back(entry);
  }
}

// Each thread count against the first, and each precision against the first, row by row.
void print_speedups(const DecodeBenchOptions& o, const std::vector<Row>& rows) {
  const auto& threads = o.thread_counts;
  const auto& beams = o.beams;
  const size_t per_precision = threads.size() * beams.size();
  for (size_t p = 0; p < o.precisions.size(); ++p) {
    for (size_t t = 1; t < threads.size(); ++t) {
      for (size_t b = 0; b < beams.size(); ++b) {
        const auto& base = rows[p * per_precision + b].timing;
        const auto& more = rows[p * per_precision + t * beams.size() + b].timing;
        std::printf("%s, beam %lld: %d threads decode %.2fx the target tokens/s of %d\n",
                    o.precisions[p].c_str(), static_cast<long long>(beams[b]), threads[t],
                    more.tokens_per_second() / base.tokens_per_second(), threads[0]);
      }
    }
  }
  for (size_t p = 1; p < o.precisions.size(); ++p) {
    for (size_t i = 0; i < per_precision; ++i) {
      const auto& base = rows[i];
      const auto& other = rows[p * per_precision + i];
      std::printf("beam %lld, %d thread(s): %s decodes %.2fx the target tokens/s of %s",
                  static_cast<long long>(base.beam), base.threads, o.precisions[p].c_str(),
                  other.timing.tokens_per_second() / base.timing.tokens_per_second(),
                  o.precisions[0].c_str());
      if (base.bleu >= 0) std::printf(", BLEU %+.2f", other.bleu - base.bleu);
      std::printf("\n");
    }
  }
}

// Each CTranslate2 row against the Tandem row before it: the same sentences, precision, threads
// and beam.
void print_ctranslate2_ratios(const std::vector<Row>& rows) {
  for (size_t i = 1; i < rows.size(); ++i) {
    if (rows[i].engine != "ctranslate2") continue;
    const Row& tandem = rows[i - 1];
    std::printf("%s: Tandem takes %.2fx CTranslate2's decoding time (%.2fx its target tokens/s)",
                tandem.name().c_str(), tandem.timing.wall / rows[i].timing.wall,
                tandem.timing.tokens_per_second() / rows[i].timing.tokens_per_second());
    if (tandem.bleu >= 0) std::printf(", BLEU %.2f vs %.2f", tandem.bleu, rows[i].bleu);
    std::printf("\n");
  }
}

// The seeds' greedy decoder beside the one-thread beam-1 rows.
void measure_seeds(DecodeBenchOptions& o, checkpoint::InferenceModel& m, const Inputs& in,
                   const std::vector<Row>& rows, nlohmann::json& record) {
  o.decode.threads = 1;
  o.decode.beam_size = 1;
  const auto slow =
      timed(m.vocab, o.repeat, [&] { return seeds_greedy(m.model, in.sources, o.decode); });
  print_row("seeds (1 thread)", slow, "-");
  for (const auto& row : rows) {
    if (row.beam != 1 || row.threads != 1) continue;
    std::printf("beam 1 is %.1fx the seeds' greedy decoder\n",
                row.timing.tokens_per_second() / slow.tokens_per_second());
  }
  record["seeds"] = slow.json();
}

}  // namespace

// CTranslate2 stops every sentence at one length (max_decoding_length), so with --ctranslate2 both
// engines decode at most min(256, max_positions) tokens a sentence (CTranslate2's default) instead
// of Tandem's a·len+b: the same work on both sides, even for sentences that never end.
void same_length_limit(DecodeBenchOptions& o, int64_t max_positions) {
  o.decode.max_len_a = 0;
  o.decode.max_len_b = std::min<int64_t>(256, max_positions);
  std::printf("with --ctranslate2 both engines decode at most %lld tokens a sentence\n",
              static_cast<long long>(o.decode.max_len_b));
}

int run_decode_bench(DecodeBenchOptions o) {
  const torch::Device device = runtime::inference_device(o.device_flag);
  // int8 is a CPU precision: on a GPU the default list is fp32 alone, and asking for int8 fails.
  if (!device.is_cpu() && !o.precisions_given) o.precisions = {"fp32"};
  for (const auto& precision : o.precisions) cli::check_precision_on(precision, device);
  if (!o.ctranslate2.model_dir.empty()) {
    if (!device.is_cpu()) {
      throw std::invalid_argument("--ctranslate2 compares on the CPU; give --device cpu");
    }
    check_ctranslate2(o.ctranslate2);
  }
  kernels::cpu_path();  // TANDEM_CPU_KERNELS: a path this CPU executes, or exit 2
  runtime::configure_cpu_runtime({1, 0, runtime::Workload::kDecoding});
  auto m = checkpoint::load_for_inference(o.checkpoint);
  if (!o.ctranslate2.model_dir.empty()) same_length_limit(o, m.model->options().max_positions);
  m.model->to(device);  // the seeds' decoder's model: on the parameters, as the seeds ran
  const Inputs in = read_inputs(o, m.vocab);
  const auto rows = measure_rows(o, device, m.vocab, in);
  std::printf("%zu sentences, median of %d run(s)\n", in.sources.size(), o.repeat);
  nlohmann::json record{{"sentences", in.sources.size()},
                        {"repeat", o.repeat},
                        {"device", device.str()},
                        {"cpu_kernels",
                         {{"fp32", kernels::cpu_path_name(kernels::fp32_path())},
                          {"int8", kernels::cpu_path_name(kernels::int8_path())}}},
                        {"rows", {}}};
  print_rows(rows, record);
  std::vector<Row> own;  // Tandem's rows alone, for the ratios between them
  for (const auto& row : rows) {
    if (row.engine == "tandem") own.push_back(row);
  }
  print_speedups(o, own);
  print_ctranslate2_ratios(rows);
  if (o.seeds) measure_seeds(o, m, in, own, record);
  std::printf("%s\n", record.dump().c_str());
  return 0;
}

}  // namespace tandem::bench
