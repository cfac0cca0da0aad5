// What every tool's main() shares: exception → one "tandem-<tool>: error: ..." line and the exit
// code of its kind (2 for bad input, 1 otherwise), usage errors on one line too, and reading a
// text file's lines.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace tandem::cli {

// Runs `body`, mapping exceptions to exit codes and one error line on stderr.
int run_tool(const std::string& tool, const std::function<int()>& body);

// For CLI::App::failure_message: a usage error as one line, "<tool>: error: <what> (see --help)",
// instead of CLI11's two (scripts and people look for one line naming what is wrong).
std::function<std::string(const CLI::App*, const CLI::Error&)> usage_error_line(
    const std::string& tool);

// Checks for numeric options, in place of CLI11's PositiveNumber and NonNegativeNumber, whose
// messages print a double's range in full ("Value 0 not in range 0.000000 to 179769...");
// these say what is wanted: "--beam: 0 is not above 0; expected a positive number".
extern const CLI::Validator kPositive;     // above 0
extern const CLI::Validator kNonNegative;  // 0 or more

// Parses the command line into `app`'s options, then runs `check` (a CLI::ValidationError it
// throws is a usage error too). nullopt: parsed, the tool goes on. Otherwise the exit code to
// return: 0 after --help, kExitUsage after a usage error printed as usage_error_line's one line.
std::optional<int> parse_command_line(CLI::App& app, const std::string& tool, int argc, char** argv,
                                      const std::function<void()>& check = {});

// The lines of `path` ("-" reads stdin); std::invalid_argument naming `what` and the path when it
// cannot be opened.
std::vector<std::string> read_lines(const std::string& path, const std::string& what);

// Writes `lines` to `path` whole or not at all (common/atomic_file.h). std::invalid_argument naming
// `what` and the path when it cannot be created; std::runtime_error when it cannot be written.
void write_lines(const std::string& path, const std::vector<std::string>& lines,
                 const std::string& what);

}  // namespace tandem::cli
