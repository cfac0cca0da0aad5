#include "trainer/common/fault_injection.h"

#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tandem {
namespace {

struct Fault {
  int64_t rank = -1;
  int64_t step = -1;
  bool nan_gradient = false;  // kind=nan_gradient; kind=error (the default) throws
};

constexpr const char* kExpected = "expected rank=R,step=S[,kind=error|nan_gradient], R, S >= 0";

// kind=...: true when the field was one and is valid.
bool read_kind(const std::string& field, Fault& fault) {
  if (field == "kind=nan_gradient") {
    fault.nan_gradient = true;
    return true;
  }
  return field == "kind=error";
}

// "rank=R,step=S" (either order); nothing when the variable is unset or empty.
std::optional<Fault> requested_fault() {
  const char* value = std::getenv(kFaultInjectVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  Fault fault;
  std::istringstream fields(value);
  for (std::string field; std::getline(fields, field, ',');) {
    if (field.rfind("kind=", 0) == 0) {
      if (!read_kind(field, fault)) {
        throw std::invalid_argument(std::string(kFaultInjectVariable) + "='" + value +
                                    "': " + kExpected);
      }
      continue;
    }
    const auto equals = field.find('=');
    const std::string key = field.substr(0, equals);
    int64_t* target = key == "rank" ? &fault.rank : key == "step" ? &fault.step : nullptr;
    char* end = nullptr;
    const char* number = equals == std::string::npos ? "" : field.c_str() + equals + 1;
    if (target != nullptr) *target = std::strtoll(number, &end, 10);
    if (target == nullptr || end == number || *end != '\0' || *target < 0) {
      throw std::invalid_argument(std::string(kFaultInjectVariable) + "='" + value +
                                  "': " + kExpected);
    }
  }
  if (fault.rank < 0 || fault.step < 0) {
    throw std::invalid_argument(std::string(kFaultInjectVariable) + "='" + value +
                                "': expected both rank=R and step=S");
  }
  return fault;
}

}  // namespace

bool inject_fault_if_requested(int rank, int64_t step) {
  // Read once: the environment does not change during a run, and this is called every step.
  static const std::optional<Fault> fault = requested_fault();
  if (!fault || fault->rank != rank || fault->step != step) return false;
  if (fault->nan_gradient) return true;
  throw std::runtime_error("fault injected at step " + std::to_string(step) + " on rank " +
                           std::to_string(rank) + " (" + kFaultInjectVariable + ")");
}

}  // namespace tandem
