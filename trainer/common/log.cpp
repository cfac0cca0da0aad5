#include "trainer/common/log.h"

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>

#include "trainer/common/terminal.h"

namespace tandem::log {
namespace {
// "\r" to the line's start, then ANSI "erase to end of line".
constexpr const char* kEraseLine = "\r\033[K";

int g_rank = 0;
int g_world = 1;
// The watchdog thread may report while the training thread draws the status line.
std::mutex g_mutex;
std::string g_status;  // the live line on screen; empty when none is

// Writes `text` (whole lines) above the live line: erase it, print, redraw it. One fputs, so
// that mpirun forwards it in one piece.
void write_lines(const std::string& text) {
  std::lock_guard<std::mutex> lock(g_mutex);
  const std::string out = g_status.empty() ? text : kEraseLine + text + g_status;
  std::fputs(out.c_str(), stderr);
  std::fflush(stderr);
}

void emit(const char* level, const std::string& message) {
  if (g_world > 1) {
    write_lines("[tandem][rank " + std::to_string(g_rank) + "] " + level + message + "\n");
  } else {
    write_lines(std::string("[tandem] ") + level + message + "\n");
  }
}

// `path` opened as a terminal to ask for its width; -1 when it is none.
int open_if_terminal(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return -1;
  if (isatty(fd)) return fd;  // kept open for width queries
  close(fd);
  return -1;
}

// The terminal stderr reaches, as a descriptor to ask for its width; -1 when none. Under
// mpirun a rank's stderr is a pipe to mpirun even when mpirun writes to a terminal (and its
// stdout is a pseudo-terminal even when mpirun's output goes to a file), so for a rank that
// Open MPI started on this node the answer is the launcher's terminal (kTerminalVariable) or
// mpirun's own stderr, /proc/<parent>/fd/2.
int open_terminal() {
  if (isatty(STDERR_FILENO)) return STDERR_FILENO;
  if (std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return -1;
  if (const char* terminal = std::getenv(kTerminalVariable); terminal != nullptr && *terminal) {
    return open_if_terminal(terminal);
  }
  return open_if_terminal("/proc/" + std::to_string(getppid()) + "/fd/2");
}

int terminal_fd() {
  static const int fd = open_terminal();
  return fd;
}

}  // namespace

void set_rank(int rank, int world_size) {
  g_rank = rank;
  g_world = world_size;
}

int rank() { return g_rank; }

void info(const std::string& message) {
  if (g_rank != 0) return;
  write_lines("[tandem] " + message + "\n");
}

void warn(const std::string& message) { emit("warning: ", message); }
void error(const std::string& message) { emit("error: ", message); }

ProgressMode progress_mode_from_env() {
  const char* value = std::getenv("TANDEM_PROGRESS");
  const std::string mode = value == nullptr ? "" : value;
  if (mode.empty() || mode == "auto") return ProgressMode::kAuto;
  if (mode == "bar") return ProgressMode::kBar;
  if (mode == "plain") return ProgressMode::kPlain;
  throw std::invalid_argument("environment variable TANDEM_PROGRESS='" + mode +
                              "': expected auto, bar or plain");
}

bool live_status_enabled() {
  if (g_rank != 0) return false;
  switch (progress_mode_from_env()) {
    case ProgressMode::kBar:
      return true;
    case ProgressMode::kPlain:
      return false;
    case ProgressMode::kAuto:
      break;
  }
  return terminal_fd() >= 0;
}

void status(const std::string& line) {
  if (!live_status_enabled()) return;
  // One column spare: a line that fills the last column wraps on some terminals.
  const size_t width = static_cast<size_t>(terminal_columns() - 1);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_status = line.substr(0, width);
  std::fputs((kEraseLine + g_status).c_str(), stderr);
  std::fflush(stderr);
}

void end_status() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_status.empty()) return;
  g_status.clear();
  std::fputs(kEraseLine, stderr);
  std::fflush(stderr);
}

int terminal_columns() {
  winsize size{};
  const int fd = terminal_fd();
  if (fd >= 0 && ioctl(fd, TIOCGWINSZ, &size) == 0 && size.ws_col > 1) return size.ws_col;
  const char* columns = std::getenv("COLUMNS");
  const int from_env = columns == nullptr ? 0 : std::atoi(columns);
  return from_env > 1 ? from_env : 80;
}

}  // namespace tandem::log
