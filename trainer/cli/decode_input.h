// tandem-decode's input lines: plain text, or with --json-input one JSON object per line as
// Sockeye reads it, {"text": "...", "constraints": ["phrase", ...], "avoid": ["phrase", ...]}:
// the sentence, the phrases its translation must contain and those it must not, each phrase
// tokenized as the target side is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/vocab/vocab.h"
#include "trainer/decode/constraints.h"

namespace tandem::cli {

// One input line, read.
struct InputLine {
  std::string text;
  std::vector<std::string> include;  // "constraints"
  std::vector<std::string> avoid;    // "avoid"
};

// A JSON line → its fields; std::invalid_argument saying what is wrong (not JSON, not an object,
// a key other than text, constraints and avoid, a field of the wrong type, no "text").
InputLine parse_json_line(const std::string& line);

// `phrase` as target tokens; std::invalid_argument naming it as `what` ("constraints[1]") when it
// has none or a piece the vocabulary lacks (<unk>, or a special).
std::vector<int32_t> phrase_tokens(const std::string& phrase, const std::string& what,
                                   const data::Vocab& vocab);

// The line's phrases as target tokens; std::invalid_argument naming the phrase that has no
// tokens or a piece the vocabulary lacks (decode::Constraints' own checks too).
decode::Constraints line_constraints(const InputLine& line, const data::Vocab& vocab);

// Lines as tandem-decode reads them: with `json`, parsed and their phrases tokenized; without,
// the text alone. std::invalid_argument "line N: ..." naming the first bad line, where line
// `first_line` (1-based) is lines[0].
struct InputLines {
  std::vector<std::string> texts;
  std::vector<decode::Constraints> constraints;  // one per line with `json`, none without
};
InputLines read_input_lines(const std::vector<std::string>& lines, bool json,
                            const data::Vocab& vocab, int64_t first_line);

}  // namespace tandem::cli
