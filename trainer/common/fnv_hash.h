// FNV-1a 64, the one byte hash Tandem keeps for telling contents apart the same way on every
// machine: the ranks' parameter layouts, and the inputs of a chunked translation job.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tandem {

inline constexpr uint64_t kFnvOffsetBasis = 14695981039346656037ULL;

// The hash `state` (kFnvOffsetBasis to begin) carried on over `size` bytes at `data`.
inline uint64_t fnv1a(const void* data, size_t size, uint64_t state = kFnvOffsetBasis) {
  constexpr uint64_t kFnvPrime = 1099511628211ULL;
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    state ^= bytes[i];
    state *= kFnvPrime;
  }
  return state;
}

}  // namespace tandem
