#include "trainer/cli/tool_main.h"

#include <cstdio>
#include <fstream>
#include <iostream>

#include "trainer/common/error.h"

namespace tandem::cli {

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
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw_cannot_open(what, tmp);
    for (const auto& line : lines) out << line << '\n';
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw std::runtime_error(what + ": cannot write '" + tmp + "'");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error(what + ": cannot rename '" + tmp + "' to '" + path + "'");
  }
}

}  // namespace tandem::cli
