// The one reader of whole numbers that people and the environment give as text: flags, variables,
// hostfile fields, numbers in other programs' messages.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace tandem {

// The value of `text` when all of it is a base-10 whole number (an optional sign, then digits)
// that int64_t holds; nothing otherwise (empty, spaces, other characters, out of range).
std::optional<int64_t> parse_whole_number(std::string_view text);

}  // namespace tandem
