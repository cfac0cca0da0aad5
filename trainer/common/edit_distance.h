// The Levenshtein distance of two texts, byte by byte: what "did you mean" suggestions rank by
// (an unknown config key, an unknown language code).
#pragma once

#include <cstddef>
#include <string>

namespace tandem {

// Insertions, deletions and substitutions that turn `a` into `b`.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace tandem
