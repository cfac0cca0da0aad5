// Logging: rank-aware lines on stderr. Rank 0 speaks by default; per-rank lines carry "[rank N]".
// Rank 0 may also keep one live status line (a progress bar) at the bottom of a terminal; every
// other line printed here erases it first and redraws it below, so neither garbles the other.
#pragma once

#include <string>

namespace tandem::log {

// Set once at start-up by the process group; 0 for single-process tools.
void set_rank(int rank, int world_size);
int rank();

// Rank 0 only: "[tandem] message".
void info(const std::string& message);
// Every rank: "[tandem][rank N] warning: message".
void warn(const std::string& message);
// Every rank: "[tandem][rank N] error: message".
void error(const std::string& message);

// How progress is shown, from TANDEM_PROGRESS: "plain" (lines only), "bar" (live line forced,
// e.g. through a pipe you watch), "auto" or unset (live line when stderr reaches a terminal).
enum class ProgressMode { kAuto, kBar, kPlain };
// std::invalid_argument naming the variable and its value when it is none of the three.
ProgressMode progress_mode_from_env();

// Whether this process draws a live status line: rank 0, and a terminal (or mode kBar).
bool live_status_enabled();
// Draws `line` in place of the previous status line ("\r", clear to end of line), cut to the
// terminal's width so that it never wraps; does nothing when live_status_enabled() is false.
void status(const std::string& line);
// Erases the status line; the next status() draws a new one.
void end_status();

// Columns of the terminal stderr reaches (80 when unknown).
int terminal_columns();

}  // namespace tandem::log
