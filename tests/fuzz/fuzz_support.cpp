#include <cstdio>
#include <cstdlib>

#include "tests/fuzz/fuzz_target.h"

namespace tandem::fuzz {

void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz target: %s\n", what.c_str());
  std::abort();
}

}  // namespace tandem::fuzz
