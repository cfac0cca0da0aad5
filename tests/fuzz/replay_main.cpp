// The main of a fuzz target outside libFuzzer: runs the target on its seeds, then on every file
// under each argument (a file, or a folder read recursively in name order), and prints how many
// it ran. What libFuzzer would report (a crash, a sanitizer report, an uncaught exception) ends
// the run the same way; an argument that does not exist is an error, so a mistyped path in
// tests/fuzz/CMakeLists.txt cannot pass by replaying nothing.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) {
    const fs::path path(argv[i]);
    if (fs::is_regular_file(path)) {
      files.push_back(path.string());
    } else if (fs::is_directory(path)) {
      for (const auto& entry : fs::recursive_directory_iterator(path)) {
        if (entry.is_regular_file()) files.push_back(entry.path().string());
      }
    } else {
      std::fprintf(stderr, "%s: no file or folder '%s'\n", argv[0], argv[i]);
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  const std::vector<std::string> seeds = tandem::fuzz::seeds();
  for (const std::string& seed : seeds) run(seed);
  for (const std::string& file : files) {
    std::printf("%s\n", file.c_str());
    std::fflush(stdout);
    run(read_file(file));
  }
  std::printf("replayed %zu seeds and %zu saved inputs\n", seeds.size(), files.size());
  return 0;
}
