// tandem-bench-decode: decoding speed of a checkpoint on a file for every precision, beam size and
// thread count asked for; bench/decode_bench.h measures and prints.
#include <CLI/CLI.hpp>

#include "trainer/bench/variant_bench.h"
#include "trainer/bench/decode_bench.h"
#include "trainer/cli/decode_flags.h"
#include "trainer/cli/tool_main.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en --ref work/bible/test.es
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en --beams 1 4 --threads 1
  tandem-export --checkpoint runs/tiny/last.h5 --to ctranslate2 --out runs/tiny/ct2
  PYTHONPATH=$(launch/ctranslate2.sh) tandem-bench-decode --checkpoint runs/tiny/last.h5 \
    --input work/bible/test.en --ref work/bible/test.es --ctranslate2 runs/tiny/ct2
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en \
    --ref work/bible/test.es --constraints --beams 1 4 8 --threads 1 --repeat 3
  tandem-bench-decode --checkpoint runs/tiny/last.h5 --input work/bible/test.en \
    --ref work/bible/test.es --shortlist runs/tiny/shortlist.h5 --beams 1 4 --threads 1)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Decoding speed of a checkpoint: beam sizes x thread counts (and the seeds' decoder)."};
  tandem::bench::DecodeBenchOptions o;
  app.add_option("--checkpoint", o.checkpoint, "checkpoint file (*.h5)")->required();
  app.add_option("--input", o.input, "source sentences, one per line")->required();
  app.add_option("--ref", o.ref, "reference translations of --input, for the BLEU of each row");
  app.add_option("--threads", o.thread_counts,
                 "decoding thread counts to measure (one intra-op thread each)")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--precisions", o.precisions,
                 "precisions to measure: fp32, and int8 (tandem-decode --precision int8)")
      ->check(CLI::IsMember({"fp32", "int8"}))
      ->capture_default_str();
  app.add_option("--beams", o.beams, "beam sizes to measure")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--batch-tokens", o.decode.batch_tokens, "source tokens per decoding batch")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--repeat", o.repeat, "runs per row; the median wall time is reported")
      ->check(tandem::cli::kPositive)
      ->capture_default_str();
  app.add_option("--max-lines", o.max_lines, "use the first N lines; 0 = all")
      ->capture_default_str();
  app.add_flag("--seeds", o.seeds, "also time the seeds' uncached greedy decoder (slow)");
  bool constraints = false;
  app.add_flag("--constraints", constraints,
               "instead: terminology constraints' cost and gain. Each line includes one or two "
               "phrases of its --ref; per precision and beam, plain and constrained decoding "
               "alternate (first --threads): lines/s, BLEU, phrases held");
  std::string shortlist;
  app.add_option("--shortlist", shortlist,
                 "instead: a lexical shortlist's (tandem-shortlist) gain: per precision and beam, "
                 "plain decoding and decoding on the shortlist alternate (first --threads)")
      ->excludes("--constraints");
  tandem::cli::add_device_flag(app, o.device_flag);
  app.add_option("--ctranslate2", o.ctranslate2.model_dir,
                 "also decode every row with CTranslate2 on this folder (tandem-export --to "
                 "ctranslate2 of the same checkpoint, float32), timing its decoding alone; both "
                 "engines then stop a sentence at min(256, max_positions) tokens, CTranslate2 "
                 "having no a * length + b limit. Needs ctranslate2 on PYTHONPATH "
                 "(launch/ctranslate2.sh prints the folder)");
  app.add_option("--ctranslate2-python", o.ctranslate2.python,
                 "the Python interpreter that runs CTranslate2")
      ->capture_default_str();
  o.ctranslate2.script = std::string(TANDEM_SOURCE_DIR) + "/launch/ctranslate2-decode.py";
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-bench-decode", argc, argv)) {
    return *done;
  }
  o.precisions_given = app.count("--precisions") > 0;
  return tandem::cli::run_tool("tandem-bench-decode", [&] {
    return constraints || !shortlist.empty() ? tandem::bench::run_variant_bench(o, shortlist)
                                             : tandem::bench::run_decode_bench(o);
  });
}
