#include "trainer/common/fault_injection.h"

#include <csignal>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trainer/common/log.h"
#include "trainer/common/whole_number.h"

namespace tandem {
namespace {

enum class Kind { kError, kNanGradient, kSigkill, kSigstop };

struct Fault {
  int64_t rank = -1;
  int64_t step = -1;
  int64_t restart = -1;  // -1: in every run of the job
  Kind kind = Kind::kError;
};

constexpr const char* kExpected =
    "expected rank=R,step=S[,kind=error|nan_gradient|sigkill|sigstop][,restart=N], R, S, N >= 0";

[[noreturn]] void malformed(const char* value, const char* expected = kExpected) {
  throw std::invalid_argument(std::string(kFaultInjectVariable) + "='" + value + "': " + expected);
}

// kind=...: true when the field was one and is valid.
bool read_kind(const std::string& name, Fault& fault) {
  const std::pair<const char*, Kind> kinds[] = {{"error", Kind::kError},
                                                {"nan_gradient", Kind::kNanGradient},
                                                {"sigkill", Kind::kSigkill},
                                                {"sigstop", Kind::kSigstop}};
  for (const auto& [text, kind] : kinds) {
    if (name == text) {
      fault.kind = kind;
      return true;
    }
  }
  return false;
}

// A whole number >= 0, or -1 when `text` is not one.
int64_t read_count(const char* text) {
  const auto value = parse_whole_number(text);
  return value && *value >= 0 ? *value : -1;
}

// The fields in any order; nothing when the variable is unset or empty.
std::optional<Fault> requested_fault() {
  const char* value = std::getenv(kFaultInjectVariable);
  if (value == nullptr || *value == '\0') return std::nullopt;
  Fault fault;
  std::istringstream fields(value);
  for (std::string field; std::getline(fields, field, ',');) {
    const auto equals = field.find('=');
    if (equals == std::string::npos) malformed(value);
    const std::string key = field.substr(0, equals);
    const std::string text = field.substr(equals + 1);
    if (key == "kind") {
      if (!read_kind(text, fault)) malformed(value);
      continue;
    }
    int64_t* target = key == "rank"      ? &fault.rank
                      : key == "step"    ? &fault.step
                      : key == "restart" ? &fault.restart
                                         : nullptr;
    if (target == nullptr || (*target = read_count(text.c_str())) < 0) malformed(value);
  }
  if (fault.rank < 0 || fault.step < 0) malformed(value, "expected both rank=R and step=S");
  return fault;
}

int64_t restart_count() {
  const char* text = std::getenv(kRestartCountVariable);
  return text == nullptr ? 0 : read_count(text);
}

}  // namespace

bool inject_fault_if_requested(int rank, int64_t step) {
  // Read once: the environment does not change during a run, and this is called every step.
  static const std::optional<Fault> fault = requested_fault();
  static const int64_t restart = restart_count();
  if (!fault || fault->rank != rank || fault->step != step) return false;
  if (fault->restart >= 0 && fault->restart != restart) return false;
  const std::string where = "fault injected at step " + std::to_string(step) + " on rank " +
                            std::to_string(rank) + " (" + kFaultInjectVariable + ")";
  switch (fault->kind) {
    case Kind::kNanGradient:
      return true;
    case Kind::kSigkill:
    case Kind::kSigstop: {
      const bool kill = fault->kind == Kind::kSigkill;
      log::warn(where + ": " + (kill ? "SIGKILL" : "SIGSTOP"));
      std::fflush(nullptr);
      raise(kill ? SIGKILL : SIGSTOP);
      return false;  // continued after SIGSTOP: as if nothing had happened
    }
    case Kind::kError:
      break;
  }
  throw std::runtime_error(where);
}

}  // namespace tandem
