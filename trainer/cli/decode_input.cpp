#include "trainer/cli/decode_input.h"

#include <nlohmann/json.hpp>

#include <stdexcept>

#include "trainer/common/token_ids.h"

namespace tandem::cli {
namespace {

// Field `key` of `object`, a list of strings, into `out` (absent: none).
void read_phrases(const nlohmann::json& object, const char* key, std::vector<std::string>& out) {
  if (!object.contains(key)) return;
  const auto& list = object.at(key);
  if (!list.is_array()) {
    throw std::invalid_argument(std::string("\"") + key + "\" must be a list of strings, not " +
                                list.dump());
  }
  for (const auto& phrase : list) {
    if (!phrase.is_string()) {
      throw std::invalid_argument(std::string("\"") + key + "\" must hold strings, not " +
                                  phrase.dump());
    }
    out.push_back(phrase.get<std::string>());
  }
}

}  // namespace

std::vector<int32_t> phrase_tokens(const std::string& phrase, const std::string& what,
                                   const data::Vocab& vocab) {
  auto tokens = vocab.encode(phrase, data::Side::kTarget);
  if (tokens.empty()) {
    throw std::invalid_argument(what + " \"" + phrase + "\" has no tokens");
  }
  for (const int32_t token : tokens) {
    if (token == kUnkId || vocab.special(token)) {
      throw std::invalid_argument(what + " \"" + phrase +
                                  "\" cannot be tokenized: the target vocabulary lacks a piece "
                                  "of it (" + vocab.piece(token) + ")");
    }
  }
  return tokens;
}

InputLine parse_json_line(const std::string& line) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::invalid_argument(std::string("not JSON (") + e.what() + ")");
  }
  if (!object.is_object()) throw std::invalid_argument("not a JSON object: " + object.dump());
  for (const auto& item : object.items()) {
    if (item.key() != "text" && item.key() != "constraints" && item.key() != "avoid") {
      throw std::invalid_argument("unknown key \"" + item.key() +
                                  "\" (the keys are text, constraints and avoid)");
    }
  }
  if (!object.contains("text") || !object.at("text").is_string()) {
    throw std::invalid_argument("no \"text\" string");
  }
  InputLine out;
  out.text = object.at("text").get<std::string>();
  read_phrases(object, "constraints", out.include);
  read_phrases(object, "avoid", out.avoid);
  return out;
}

decode::Constraints line_constraints(const InputLine& line, const data::Vocab& vocab) {
  decode::Constraints out;
  for (size_t i = 0; i < line.include.size(); ++i) {
    out.include.push_back(
        phrase_tokens(line.include[i], "constraints[" + std::to_string(i) + "]", vocab));
  }
  for (size_t i = 0; i < line.avoid.size(); ++i) {
    out.avoid.push_back(phrase_tokens(line.avoid[i], "avoid[" + std::to_string(i) + "]", vocab));
  }
  decode::check_phrases(out);
  return out;
}

InputLines read_input_lines(const std::vector<std::string>& lines, bool json,
                            const data::Vocab& vocab, int64_t first_line) {
  InputLines out;
  if (!json) {
    out.texts = lines;
    return out;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    try {
      auto line = parse_json_line(lines[i]);
      out.constraints.push_back(line_constraints(line, vocab));
      out.texts.push_back(std::move(line.text));
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument("line " + std::to_string(first_line + static_cast<int64_t>(i)) +
                                  ": " + e.what());
    }
  }
  return out;
}

}  // namespace tandem::cli
