// The normalization table's layout, as SentencePiece's normalizer reads it: a little-endian uint32
// trie size N, N bytes of a darts-clone double array (32-bit units), then the replacement strings,
// each ending in NUL. A lookup walks the array from unit 0: at node p the byte c leads to unit
// p ^ c, which belongs to p when its label is c; the walk continues at that unit ^ its offset,
// where a leaf unit's value is a replacement's start in the strings. Checked here: every node the
// walk can reach has all its 256 children inside the array, and every value reached starts a
// string inside the strings, which end in NUL.
#include "data/vocab/sentencepiece_check.h"

#include <cstdint>
#include <mutex>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace tandem::data {
namespace {

// Protobuf's wire format, as far as finding fields takes.
class Fields {
 public:
  explicit Fields(std::string_view bytes) : rest_(bytes) {}

  // The next field: its number and, for a length-delimited one, its bytes. False at the end;
  // *error set when the bytes stop mid-field or hold a group.
  bool next(uint32_t* number, std::string_view* bytes, std::string* error) {
    if (rest_.empty()) return false;
    uint64_t key = 0, value = 0;
    if (!varint(&key)) return fail("a field key is cut short", error);
    *number = static_cast<uint32_t>(key >> 3);
    *bytes = {};
    switch (key & 7) {
      case 0:
        if (!varint(&value)) return fail("a number is cut short", error);
        return true;
      case 1:
        return skip(8, error);
      case 5:
        return skip(4, error);
      case 2:
        if (!varint(&value) || value > rest_.size())
          return fail("a field's bytes are cut short", error);
        *bytes = rest_.substr(0, value);
        rest_.remove_prefix(value);
        return true;
      default:
        return fail("wire type " + std::to_string(key & 7) + " (a group?)", error);
    }
  }

 private:
  bool varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && !rest_.empty(); shift += 7) {
      const auto byte = static_cast<uint8_t>(rest_.front());
      rest_.remove_prefix(1);
      *value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;
  }
  bool skip(size_t size, std::string* error) {
    if (rest_.size() < size) return fail("a fixed-size field is cut short", error);
    rest_.remove_prefix(size);
    return true;
  }
  static bool fail(const std::string& what, std::string* error) {
    *error = what;
    return false;
  }
  std::string_view rest_;
};

uint32_t unit_at(std::string_view trie, size_t index) {
  const auto* p = reinterpret_cast<const uint8_t*>(trie.data()) + 4 * index;
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}
// darts-clone's unit fields.
bool has_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t value_of(uint32_t unit) { return unit & ((1u << 31) - 1); }
uint32_t label_of(uint32_t unit) { return unit & ((1u << 31) | 0xff); }
uint32_t offset_of(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

std::string table_problem(std::string_view table) {
  if (table.empty()) return "";  // no normalization (the identity rule)
  if (table.size() < 4) return "it is shorter than its size field";
  const uint32_t trie_size = unit_at(table, 0);
  if (trie_size >= table.size() - 4 + 1 || trie_size % 4 != 0) {
    return "its trie size " + std::to_string(trie_size) + " does not fit its " +
           std::to_string(table.size()) + " bytes";
  }
  const std::string_view trie = table.substr(4, trie_size);
  const std::string_view strings = table.substr(4 + trie_size);
  const size_t units = trie.size() / 4;
  if (units == 0) return "its trie is empty";
  if (strings.empty() || strings.back() != '\0') return "its strings do not end in NUL";
  std::vector<bool> seen(units, false);
  std::vector<size_t> pending{offset_of(unit_at(trie, 0))};  // the root's children start here
  while (!pending.empty()) {
    const size_t node = pending.back();
    pending.pop_back();
    if ((node | 0xff) >= units) {
      return "its trie leads to unit " + std::to_string(node | 0xff) + " of " +
             std::to_string(units);
    }
    if (seen[node]) continue;
    seen[node] = true;
    for (uint32_t c = 0; c < 256; ++c) {
      const uint32_t child = unit_at(trie, node ^ c);
      if (label_of(child) != c) continue;
      const size_t next = (node ^ c) ^ offset_of(child);
      if (next >= units) {
        return "its trie leads to unit " + std::to_string(next) + " of " + std::to_string(units);
      }
      if (has_leaf(child) && value_of(unit_at(trie, next)) >= strings.size()) {
        return "its trie maps to string " + std::to_string(value_of(unit_at(trie, next))) + " of " +
               std::to_string(strings.size()) + " bytes";
      }
      pending.push_back(next);
    }
  }
  return "";
}

// table_problem, once per distinct table in a process: the walk reads every reachable node's 256
// children, and a process loads the same vocabulary again and again (a corpus, its checkpoints,
// every fuzz input).
std::string checked_table_problem(std::string_view table) {
  static std::mutex mutex;
  static std::unordered_set<std::string> passed;
  {
    const std::lock_guard<std::mutex> lock(mutex);
    if (passed.count(std::string(table)) > 0) return "";
  }
  std::string problem = table_problem(table);
  if (problem.empty()) {
    const std::lock_guard<std::mutex> lock(mutex);
    passed.emplace(table);
  }
  return problem;
}

// Every precompiled_charsmap (field 2) of a NormalizerSpec message.
std::string spec_problem(std::string_view spec, const char* which) {
  Fields fields(spec);
  uint32_t number;
  std::string_view bytes;
  std::string error;
  while (fields.next(&number, &bytes, &error)) {
    if (number != 2) continue;
    const std::string problem = checked_table_problem(bytes);
    if (!problem.empty()) return std::string("the ") + which + "'s table: " + problem;
  }
  return error.empty() ? "" : std::string("the ") + which + ": " + error;
}

}  // namespace

std::string sentencepiece_table_problem(const std::string& model) {
  // ModelProto: normalizer_spec is field 3, denormalizer_spec field 5.
  Fields fields(model);
  uint32_t number;
  std::string_view bytes;
  std::string error;
  while (fields.next(&number, &bytes, &error)) {
    if (number != 3 && number != 5) continue;
    const std::string problem = spec_problem(bytes, number == 3 ? "normalizer" : "denormalizer");
    if (!problem.empty()) return problem;
  }
  return error;
}

}  // namespace tandem::data
