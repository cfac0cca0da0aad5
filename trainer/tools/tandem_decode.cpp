// tandem-decode: translate stdin to stdout with a checkpoint, one sentence per line, in order.
#include <CLI/CLI.hpp>

#include <iostream>

#include "trainer/common/error.h"
#include "trainer/tools/tool_main.h"
#include "trainer/train/evaluate.h"
#include "trainer/train/model_io.h"
#include "trainer/train/threads.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  echo "In the beginning God created the heavens and the earth." | \
    tandem-decode --checkpoint runs/tiny/last.h5
  tandem-decode --checkpoint runs/tiny/last.h5 < test.en > hyp.es)";

// Translates a chunk of lines and writes them, so output streams while input is still arriving.
void flush_chunk(tandem::train::InferenceModel& m, std::vector<std::string>& lines,
                 const tandem::decode::DecodeOptions& options) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(lines.size());
  for (const auto& line : lines) sources.push_back(m.vocab.encode(line));
  for (const auto& out : tandem::train::translate_tokens(m.model, m.vocab, sources, options)) {
    std::cout << out << '\n';
  }
  std::cout.flush();
  lines.clear();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Translate standard input with a Tandem checkpoint (greedy decoding, batched)."};
  std::string checkpoint;
  tandem::decode::DecodeOptions options;
  size_t chunk_lines = 500;
  int threads = 0;
  app.add_option("--checkpoint", checkpoint, "checkpoint file (*.h5)")->required();
  app.add_option("--batch-tokens", options.batch_tokens, "source tokens per decoding batch")->check(CLI::PositiveNumber);
  app.add_option("--max-len-a", options.max_len_a, "max output length = a * source length + b");
  app.add_option("--max-len-b", options.max_len_b, "see --max-len-a");
  app.add_option("--chunk-lines", chunk_lines, "lines read before translating and writing them")->check(CLI::PositiveNumber);
  app.add_option("--threads", threads, "intra-op threads (0: LibTorch's default)");
  app.footer(kExamples);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : tandem::kExitUsage;
  }
  return tandem::tools::run_tool("tandem-decode", [&] {
    if (threads > 0) tandem::train::set_compute_threads(threads);
    auto m = tandem::train::load_for_inference(checkpoint);
    std::vector<std::string> lines;
    for (std::string line; std::getline(std::cin, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines.push_back(std::move(line));
      if (lines.size() >= chunk_lines) flush_chunk(m, lines, options);
    }
    if (!lines.empty()) flush_chunk(m, lines, options);
    return 0;
  });
}
