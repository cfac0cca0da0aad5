// Running the real tool binaries from end-to-end tests: a command line, its exit code and output.
#pragma once

#include <string>

namespace tandem::test {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` with /bin/sh, stderr merged into stdout.
CommandResult run_command(const std::string& command);

// The path of a built tool, e.g. tool("tandem-train").
std::string tool(const std::string& name);

// "mpirun --oversubscribe -np N -x ..." with the environment the tests need (root allowed).
std::string mpirun(int ranks);

// Writes `text` to `path`.
void write_file(const std::string& path, const std::string& text);

}  // namespace tandem::test
