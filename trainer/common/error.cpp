#include "trainer/common/error.h"

#include <cerrno>
#include <cstring>

namespace tandem {

int exit_code_for(const std::exception& e) {
  if (dynamic_cast<const std::invalid_argument*>(&e) != nullptr) return kExitUsage;
  return kExitFailure;
}

void throw_cannot_open(const std::string& what, const std::string& path) {
  const int err = errno;
  std::string reason = err != 0 ? std::strerror(err) : "unknown reason";
  throw std::invalid_argument(what + ": cannot open '" + path + "' (" + reason + ")");
}

}  // namespace tandem
