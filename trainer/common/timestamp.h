// The wall-clock time as an ISO 8601 UTC timestamp, for what files record about their writer.
#pragma once

#include <string>

namespace tandem {

// Now, e.g. "2026-11-26T08:38:10Z" (whole seconds).
std::string utc_now_iso8601();

}  // namespace tandem
