// tandem-shortlist: a lexical shortlist from a prepared corpus (IBM Model 1 on its train pairs;
// data/shortlist/shortlist.h), for tandem-decode --shortlist and tandem-export's CTranslate2
// vocabulary map.
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>

#include "data/shortlist/ibm_model1.h"
#include "trainer/cli/tool_main.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-shortlist --corpus work/bible/corpus.h5 --out runs/tiny/shortlist.h5
  tandem-decode --checkpoint runs/tiny/last.h5 --shortlist runs/tiny/shortlist.h5 < test.en
  tandem-export --checkpoint runs/tiny/last.h5 --to ctranslate2 --out runs/tiny/ct2 \
    --shortlist runs/tiny/shortlist.h5        # vmap.txt: CTranslate2's use_vmap=True

Each source piece keeps the --top-k target pieces of highest t(target | source) under IBM Model 1
(--iterations EM steps from a uniform start, on --max-pairs train pairs evenly spaced); with the
--frequent most frequent target pieces they are what a batch may produce.)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Build a lexical shortlist from a prepared corpus (IBM Model 1 alignments)."};
  std::string corpus_path, out;
  tandem::data::ShortlistOptions options;
  app.add_option("--corpus", corpus_path, "prepared corpus (tandem-prep's HDF5)")->required();
  app.add_option("--out", out, "the shortlist file to write (HDF5)")->required();
  app.add_option("--top-k", options.top_k, "target pieces kept per source piece")
      ->capture_default_str()
      ->check(tandem::cli::kPositive);
  app.add_option("--frequent", options.frequent,
                 "most frequent target pieces, candidates of every batch")
      ->capture_default_str()
      ->check(tandem::cli::kNonNegative);
  app.add_option("--iterations", options.iterations, "EM iterations of IBM Model 1")
      ->capture_default_str()
      ->check(tandem::cli::kPositive);
  app.add_option("--max-pairs", options.max_pairs,
                 "train pairs aligned, evenly spaced over the split (memory grows with them); 0: all")
      ->capture_default_str()
      ->check(tandem::cli::kNonNegative);
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-shortlist", argc, argv)) {
    return *done;
  }
  return tandem::cli::run_tool("tandem-shortlist", [&] {
    const auto start = std::chrono::steady_clock::now();
    const tandem::data::Corpus corpus(corpus_path);
    const auto shortlist = tandem::data::shortlist_from_corpus(corpus, options);
    shortlist.save(out);
    int64_t listed = 0;
    for (int32_t s = 0; s < shortlist.vocab_size(); ++s) {
      listed += shortlist.targets_of(s).empty() ? 0 : 1;
    }
    std::printf("tandem-shortlist: wrote %s: %lld source pieces with up to %lld targets each, "
                "%zu frequent targets, %.1f s\n",
                out.c_str(), static_cast<long long>(listed),
                static_cast<long long>(options.top_k), shortlist.frequent().size(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return 0;
  });
}
