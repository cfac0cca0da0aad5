#include "tests/e2e/run_command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

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

BackgroundCommand::BackgroundCommand(const std::string& command) {
  int fds[2];
  if (pipe(fds) != 0) throw std::runtime_error("pipe failed");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);  // its own process group, so the destructor can end everything it started
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  fd_ = fds[0];
}

BackgroundCommand::~BackgroundCommand() {
  if (pid_ > 0) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
  if (fd_ >= 0) close(fd_);
}

bool BackgroundCommand::wait_for_line(const std::string& text) {
  std::array<char, 4096> buffer{};
  for (;;) {
    for (size_t end; (end = output_.find('\n', scanned_)) != std::string::npos; scanned_ = end + 1) {
      if (output_.substr(scanned_, end - scanned_).find(text) != std::string::npos) {
        scanned_ = end + 1;
        return true;
      }
    }
    const ssize_t n = read(fd_, buffer.data(), buffer.size());
    if (n <= 0) return false;
    output_.append(buffer.data(), static_cast<size_t>(n));
  }
}

int BackgroundCommand::wait() {
  std::array<char, 4096> buffer{};
  for (ssize_t n; (n = read(fd_, buffer.data(), buffer.size())) > 0;) {
    output_.append(buffer.data(), static_cast<size_t>(n));
  }
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
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
