// Config → YAML: every key, numbers in their shortest exact form, so the text printed at start-up
// and stored in checkpoints reads back as the very same Config.
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/config/fields.h"

namespace tandem::config {
namespace detail {

std::string shortest_decimal(double value) {
  char buffer[40];
  int precision = 1;
  for (; precision <= 17; ++precision) {
    std::snprintf(buffer, sizeof buffer, "%.*g", precision, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  // %g writes 20 as "2e+01" at precision 1; integral digits below 1e16 read better in full.
  const double magnitude = std::fabs(value);
  if (magnitude >= 1 && magnitude < 1e16) {
    const int digits = static_cast<int>(std::floor(std::log10(magnitude))) + 1;
    if (digits > precision) std::snprintf(buffer, sizeof buffer, "%.*g", digits, value);
  }
  return buffer;
}

std::string format_double(double value) {
  if (std::isnan(value)) return ".nan";
  if (std::isinf(value)) return value > 0 ? ".inf" : "-.inf";
  std::string text = shortest_decimal(value);
  // "1e-09" → "1.0e-9": a dot keeps it a float for YAML 1.1 readers too, and no padded exponent.
  const size_t e = text.find('e');
  std::string mantissa = text.substr(0, e);
  std::string exponent = e == std::string::npos ? "" : text.substr(e);
  if (mantissa.find('.') == std::string::npos) mantissa += ".0";
  while (exponent.size() > 3 && exponent[2] == '0') exponent.erase(2, 1);
  return mantissa + exponent;
}

}  // namespace detail

namespace {

std::string format_value(int64_t value) { return std::to_string(value); }
std::string format_value(uint64_t value) { return std::to_string(value); }
std::string format_value(double value) { return detail::format_double(value); }
std::string format_value(bool value) { return value ? "true" : "false"; }

template <class Enum, class = std::enable_if_t<std::is_enum_v<Enum>>>
std::string format_value(Enum value) {
  return name_of(value);
}

// yaml-cpp quotes only what needs it: paths stay plain, "" and "a: b" get quotes.
std::string format_value(const std::string& value) {
  YAML::Emitter emitter;
  emitter << value;
  return emitter.c_str();
}

std::string format_value(const std::vector<CorpusWeight>& value) {
  return format_value(to_text(value));
}
std::string format_value(const ValidMetricChoice& value) { return format_value(to_text(value)); }

}  // namespace

// A section inside a section ("train.alignment") is written under its parent, indented.
std::string to_yaml(const Config& config) {
  std::string out;
  std::string current_section;
  std::string indent;
  detail::for_each_field(config, [&](const char* section, const char* key, const auto& value) {
    if (current_section != section) {
      current_section = section;
      const size_t dot = current_section.rfind('.');
      indent = dot == std::string::npos ? "" : "  ";
      out += indent + current_section.substr(dot + 1) + ":\n";
    }
    std::string text = format_value(value);
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, int64_t>) {
      if (detail::takes_auto(section, key) && value == kAutoMaxTokens) text = "auto";
    }
    out += indent + "  " + key + ": " + text + "\n";
  });
  return out;
}

}  // namespace tandem::config
