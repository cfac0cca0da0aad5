// FNV-1a 64, the one byte hash Tandem keeps for telling contents apart the same way on every
// machine: the ranks' parameter layouts, and the inputs of a chunked translation job.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>

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

// FNV-1a's step taken over 8-byte words (then the bytes of the tail): eight times fewer steps, for
// hashing gigabytes (the weights of a LoRA base). Not byte-order independent: the same machine
// type's words.
inline uint64_t fnv1a_words(const void* data, size_t size, uint64_t state = kFnvOffsetBasis) {
  constexpr uint64_t kFnvPrime = 1099511628211ULL;
  const auto* bytes = static_cast<const unsigned char*>(data);
  const size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t word;
    std::memcpy(&word, bytes + 8 * i, 8);
    state ^= word;
    state *= kFnvPrime;
  }
  return fnv1a(bytes + 8 * words, size - 8 * words, state);
}

// A hash as files and records spell it: 16 lowercase hex digits.
inline std::string hash_text(uint64_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

// hash_text's inverse; std::invalid_argument naming `source` unless `text` is 16 hex digits.
inline uint64_t hash_from_text(const std::string& text, const std::string& source) {
  size_t used = 0;
  uint64_t value = 0;
  try {
    value = std::stoull(text, &used, 16);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.size() != 16 || used != text.size()) {
    throw std::invalid_argument(source + ": '" + text + "' is not a 16-digit hex hash");
  }
  return value;
}

}  // namespace tandem
