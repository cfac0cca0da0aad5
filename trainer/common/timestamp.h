// The wall-clock time as an ISO 8601 UTC timestamp, for what files record about their writer, and
// durations as progress lines show them.
#pragma once

#include <string>

namespace tandem {

// Now, e.g. "2026-11-26T08:38:10Z" (whole seconds).
std::string utc_now_iso8601();

// "1h02m03s" (an hour or more) or "2m03s"; negative counts as 0.
std::string format_duration(double seconds);

}  // namespace tandem
