#include "trainer/common/log.h"

#include <cstdio>

namespace tandem::log {
namespace {
int g_rank = 0;
int g_world = 1;

void emit(const char* level, const std::string& message) {
  if (g_world > 1) {
    std::fprintf(stderr, "[tandem][rank %d] %s%s\n", g_rank, level, message.c_str());
  } else {
    std::fprintf(stderr, "[tandem] %s%s\n", level, message.c_str());
  }
  std::fflush(stderr);
}
}  // namespace

void set_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}

int rank() { return g_rank; }

void info(const std::string& message) {
  if (g_rank != 0) return;
  std::fprintf(stderr, "[tandem] %s\n", message.c_str());
  std::fflush(stderr);
}

void warn(const std::string& message) { emit("warning: ", message); }
void error(const std::string& message) { emit("error: ", message); }

}  // namespace tandem::log
