// How the ranks a launcher starts find the terminal it relays their output to.
#pragma once

namespace tandem::log {

// The terminal's path (e.g. /dev/pts/3), set by tandem-train's launcher for the ranks it starts on
// this machine: their stderr reaches that terminal through two pipes (to mpirun, to the launcher),
// so rank 0 asks it for its width and keeps a live status line there (log.h).
constexpr const char* kTerminalVariable = "TANDEM_TERMINAL";

}  // namespace tandem::log
