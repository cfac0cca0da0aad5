// tandem-average: average the parameters of several checkpoints into a new one (optimizer-free)
// that tandem-eval and tandem-decode read.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "trainer/checkpoint/average.h"
#include "trainer/common/error.h"
#include "trainer/cli/tool_main.h"

namespace {

constexpr const char* kExamples = R"(Examples:
  tandem-average --dir runs/tiny --last 5 --out runs/tiny/averaged.h5
  tandem-average runs/tiny/step-00004000.h5 runs/tiny/step-00005000.h5 --out avg.h5
  tandem-eval --checkpoint runs/tiny/averaged.h5 --split test
The output takes config, vocabulary and step from the newest input and records the inputs in its
root attribute averaged_from. Give it a name other than step-*.h5 or last.h5 so that training
never resumes from it.)";

struct Args {
  std::string out, dir;
  int64_t last = 0;
  std::vector<std::string> inputs;
};

// Exactly one of: files on the command line, or --dir with --last.
std::vector<std::string> input_paths(const Args& args) {
  if (!args.inputs.empty()) {
    if (!args.dir.empty() || args.last > 0) {
      throw std::invalid_argument("give checkpoint files or --dir/--last, not both");
    }
    return args.inputs;
  }
  if (args.dir.empty() || args.last <= 0) {
    throw std::invalid_argument("give checkpoint files, or --dir DIR with --last N");
  }
  return tandem::checkpoint::last_step_files(args.dir, args.last);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Average the parameters of checkpoints into a new checkpoint (for eval/decode)."};
  Args args;
  app.add_option("--out", args.out, "the averaged checkpoint to write (*.h5)")->required();
  app.add_option("--dir", args.dir, "checkpoint directory to take the newest step-*.h5 from");
  app.add_option("--last", args.last, "how many of the newest step-*.h5 in --dir to average")
      ->check(tandem::cli::kPositive);
  app.add_option("checkpoints", args.inputs,
                 "checkpoint files to average (instead of --dir/--last)");
  app.footer(kExamples);
  if (const auto done = tandem::cli::parse_command_line(app, "tandem-average", argc, argv))
    return *done;
  return tandem::cli::run_tool("tandem-average", [&] {
    const std::vector<std::string> paths = input_paths(args);
    const tandem::checkpoint::CheckpointData averaged = tandem::checkpoint::average(paths);
    tandem::checkpoint::save(args.out, averaged);
    std::printf("averaged %zu checkpoint(s) into %s (step %lld)\n", paths.size(), args.out.c_str(),
                static_cast<long long>(averaged.step));
    for (const std::string& path : paths) std::printf("  %s\n", path.c_str());
    return 0;
  });
}
