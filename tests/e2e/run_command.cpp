#include "tests/e2e/run_command.h"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace tandem::test {

CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string tool(const std::string& name) { return std::string(TANDEM_TOOLS_DIR) + "/" + name; }

std::string mpirun(int ranks) {
  return std::string(TANDEM_MPIEXEC) +
         " --oversubscribe --bind-to none -np " + std::to_string(ranks) +
         " -x OMP_NUM_THREADS=1 -x OPENBLAS_NUM_THREADS=1 ";
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error("cannot write " + path);
  out << text;
}

}  // namespace tandem::test
