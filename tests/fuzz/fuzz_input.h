// Reading a fuzzer's bytes as a sequence of small decisions (which object to edit, which value to
// write), for the targets whose input is an edit of a real file rather than the file's bytes.
// Past the end every read gives zeros, so any input, the empty one too, is a valid edit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace tandem::fuzz {

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  bool empty() const { return offset_ >= size_; }
  uint8_t byte() { return offset_ < size_ ? data_[offset_++] : 0; }
  // A number in [0, bound) (0 when bound is 0), from as few bytes as the bound needs.
  uint64_t below(uint64_t bound) {
    if (bound <= 1) return 0;
    uint64_t value = 0;
    for (uint64_t span = bound - 1; span != 0; span >>= 8) value = (value << 8) | byte();
    return value % bound;
  }
  // Eight bytes as they are: any bit pattern of an int64 or a double, NaN and infinities too.
  template <class T>
  T raw() {
    static_assert(sizeof(T) <= 8, "raw reads at most 8 bytes");
    uint8_t bytes[sizeof(T)] = {};
    for (auto& b : bytes) b = byte();
    T value;
    std::memcpy(&value, bytes, sizeof(T));
    return value;
  }
  // Mostly small numbers near the values a file holds, sometimes an extreme bit pattern.
  int64_t integer() {
    switch (byte() % 4) {
      case 0:
        return static_cast<int64_t>(byte()) - 2;
      case 1:
        return static_cast<int64_t>(raw<uint16_t>()) - 256;
      case 2:
        return raw<int32_t>();
      default:
        return raw<int64_t>();
    }
  }
  // Up to `max_size` bytes, its length first.
  std::string text(size_t max_size) {
    const size_t length = below(max_size + 1);
    std::string out;
    for (size_t i = 0; i < length && !empty(); ++i) out.push_back(static_cast<char>(byte()));
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t offset_ = 0;
};

}  // namespace tandem::fuzz
