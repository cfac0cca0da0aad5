#include "trainer/cli/tool_main.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <optional>

#include "trainer/common/atomic_file.h"
#include "trainer/common/error.h"

namespace tandem::cli {
namespace {

CLI::Validator number_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double value = 0;
        if (!CLI::detail::lexical_cast(text, value)) return "'" + text + "' is not a number";
        if (value > 0 || (zero_allowed && value == 0)) return "";
        return zero_allowed ? text + " is negative; expected 0 or more"
                            : text + " is not above 0; expected a positive number";
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

const CLI::Validator kPositive = number_check(false);
const CLI::Validator kNonNegative = number_check(true);

int run_tool(const std::string& tool, const std::function<int()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error: %s\n", tool.c_str(), e.what());
    return exit_code_for(e);
  }
}

std::function<std::string(const CLI::App*, const CLI::Error&)> usage_error_line(
    const std::string& tool) {
  return [tool](const CLI::App*, const CLI::Error& e) {
    return tool + ": error: " + e.what() + " (see --help)\n";
  };
}

std::optional<int> parse_command_line(CLI::App& app, const std::string& tool, int argc, char** argv,
                                      const std::function<void()>& check) {
  app.failure_message(usage_error_line(tool));
  try {
    app.parse(argc, argv);
    if (check) check();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return std::nullopt;
}

std::vector<std::string> read_lines(const std::string& path, const std::string& what) {
  std::vector<std::string> lines;
  std::ifstream file;
  std::istream* in = &std::cin;
  if (path != "-") {
    file.open(path);
    if (!file) throw_cannot_open(what, path);
    in = &file;
  }
  for (std::string line; std::getline(*in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
  }
  return lines;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines,
                 const std::string& what) {
  std::optional<AtomicFile> file;
  try {
    file.emplace(path);
  } catch (const std::runtime_error& e) {  // a path the user gave that cannot be written
    throw std::invalid_argument(what + ": " + e.what());
  }
  std::string bytes;
  for (const auto& line : lines) bytes += line + '\n';
  try {
    file->append(bytes);
    file->commit();
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(what + ": " + e.what());
  }
}

}  // namespace tandem::cli
