// The README and docs/ against the tree and the tools: the README stays short, its layout names
// every folder that holds files under configs, data, docs, launch, tests and trainer (and none that
// does not exist), and every flag that a command in the README or docs/ gives a Tandem tool is one
// that tool's --help lists.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/run_command.h"

namespace tandem::test {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = TANDEM_SOURCE_DIR;

// "a/{b,c}/" → "a/b/", "a/c/" (one pair of braces at most).
std::vector<std::string> expand_braces(const std::string& path) {
  const auto open = path.find('{'), close = path.find('}');
  if (open == std::string::npos || close == std::string::npos || close < open) return {path};
  std::vector<std::string> out;
  std::istringstream names(path.substr(open + 1, close - open - 1));
  for (std::string name; std::getline(names, name, ',');) {
    out.push_back(path.substr(0, open) + name + path.substr(close + 1));
  }
  return out;
}

// The folders the README's layout block names: the first word of each line, when it ends in '/'.
std::set<std::string> layout_folders(const std::vector<std::string>& readme) {
  std::set<std::string> folders;
  const auto heading = std::find(readme.begin(), readme.end(), "## Layout");
  auto line = std::find(heading, readme.end(), "```");
  if (line == readme.end()) return folders;
  for (++line; line != readme.end() && *line != "```"; ++line) {
    std::istringstream words(*line);
    std::string first;
    if (words >> first && first.back() == '/') {
      for (const auto& path : expand_braces(first)) folders.insert(path);
    }
  }
  return folders;
}

// Every folder under the roots that holds a file itself; hidden and __pycache__ folders aside.
std::set<std::string> tree_folders() {
  std::set<std::string> folders;
  for (const char* root : {"configs", "data", "docs", "launch", "tests", "trainer"}) {
    for (auto it = fs::recursive_directory_iterator(kSource / root);
         it != fs::recursive_directory_iterator(); ++it) {
      const std::string name = it->path().filename().string();
      if (it->is_directory() && (name[0] == '.' || name.rfind("__", 0) == 0)) {
        it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) {
        folders.insert(fs::relative(it->path().parent_path(), kSource).string() + "/");
      }
    }
  }
  return folders;
}

TEST(Docs, ReadmeStaysUnderTwoHundredLines) {
  EXPECT_LE(lines_of(read_text(kSource / "README.md")).size(), 200u);
}

TEST(Docs, ReadmeLayoutNamesEveryFolderOfTheTreeAndNoOther) {
  const auto listed = layout_folders(lines_of(read_text(kSource / "README.md")));
  const auto present = tree_folders();
  ASSERT_FALSE(listed.empty()) << "README.md has no ``` block under '## Layout'";
  for (const auto& folder : present) {
    EXPECT_TRUE(listed.count(folder)) << folder << " holds files but README.md's layout omits it";
  }
  for (const auto& folder : listed) {
    EXPECT_TRUE(present.count(folder))
        << "README.md's layout names " << folder << ", which holds no file";
  }
}

// Each command in a text: from a tool's name to the end of its shell command or code span
// (a backslash at a line's end continues it), with the flags it gives that tool.
struct ToolCommand {
  std::string tool, where;
  std::set<std::string> flags;
};

std::vector<ToolCommand> tool_commands(const fs::path& file) {
  std::string text = read_text(file);
  text = std::regex_replace(text, std::regex("\\\\\n"), " ");  // continued lines
  static const std::regex tool_name(
      "tandem-(bench-decode|bench-data|prep|train|eval|decode|score|average|bench|export)(?![\\w-])");
  static const std::regex flag("--[a-z][a-z0-9-]*");
  std::vector<ToolCommand> commands;
  const auto lines = lines_of(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    for (std::sregex_iterator it(line.begin(), line.end(), tool_name), end; it != end; ++it) {
      const size_t start = static_cast<size_t>(it->position() + it->length());
      const size_t stop = line.find_first_of("`|;<>&#", start);
      const std::string args = line.substr(start, stop == std::string::npos ? stop : stop - start);
      ToolCommand command{it->str(), file.filename().string() + ":" + std::to_string(i + 1), {}};
      for (std::sregex_iterator f(args.begin(), args.end(), flag); f != end; ++f) {
        command.flags.insert(f->str());
      }
      if (!command.flags.empty()) commands.push_back(command);
    }
  }
  return commands;
}

// The options a CLI11 --help lists: the first word of each line, split at commas ("-h,--help").
std::set<std::string> options_of(const std::string& help) {
  std::set<std::string> options;
  for (const auto& line : lines_of(help)) {
    std::istringstream words(line);
    std::string first, name;
    words >> first;
    std::istringstream names(first);
    while (std::getline(names, name, ',')) {
      if (name.rfind("--", 0) == 0) options.insert(name);
    }
  }
  return options;
}

TEST(Docs, EveryToolFlagInTheReadmeAndDocsExists) {
  std::vector<fs::path> files = {kSource / "README.md"};
  for (const auto& entry : fs::directory_iterator(kSource / "docs")) {
    if (entry.path().extension() == ".md") files.push_back(entry.path());
  }
  std::map<std::string, std::set<std::string>> options;  // tool → what its --help lists
  size_t checked = 0;
  for (const auto& file : files) {
    for (const auto& command : tool_commands(file)) {
      if (!options.count(command.tool)) {
        const auto result = run_command(tool(command.tool) + " --help");
        ASSERT_EQ(result.exit_code, 0) << command.tool << " --help: " << result.output;
        options[command.tool] = options_of(result.output);
      }
      for (const auto& name : command.flags) {
        EXPECT_TRUE(options[command.tool].count(name))
            << command.where << ": " << command.tool << " has no " << name;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20u) << "the commands in README.md and docs/ were not found";
}

}  // namespace
}  // namespace tandem::test
