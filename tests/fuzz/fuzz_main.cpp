// Linked into each target under libFuzzer (launch/fuzz.sh): with TANDEM_FUZZ_SEEDS=<folder> set,
// the target's seeds are written there before fuzzing starts, as libFuzzer's starting corpus.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* folder = std::getenv("TANDEM_FUZZ_SEEDS");
  if (folder == nullptr || *folder == '\0') return 0;
  const std::vector<std::string> seeds = tandem::fuzz::seeds();
  for (size_t i = 0; i < seeds.size(); ++i) {
    const std::string path = std::string(folder) + "/seed-" + std::to_string(i);
    std::ofstream(path, std::ios::binary) << seeds[i];
  }
  std::fprintf(stderr, "wrote %zu seeds to %s\n", seeds.size(), folder);
  return 0;
}
