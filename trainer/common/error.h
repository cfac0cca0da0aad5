// Error kinds shared by every Tandem library, and how a tool maps them to an exit code.
// Bad input (a file, key or value the user gave) is std::invalid_argument → exit 2;
// anything else (environment, I/O, numerics) is std::runtime_error → exit 1.
#pragma once

#include <stdexcept>
#include <string>

namespace tandem {

constexpr int kExitOk = 0;
constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// A peer taken for dead or stuck: a rank that held its work past a timeout, or one that did not
// answer within it (bulk/chunk_job.h). The failure is most likely the peer's, not this rank's: the
// rank's state record says it timed out (jobs/rank_state.h).
class PeerTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Exit code a tool's main() returns for an exception that reached it.
int exit_code_for(const std::exception& e);

// "<what>: cannot open '<path>' (<strerror>)" as std::invalid_argument.
[[noreturn]] void throw_cannot_open(const std::string& what, const std::string& path);

}  // namespace tandem
