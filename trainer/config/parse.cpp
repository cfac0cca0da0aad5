// YAML → Config: a strict reader. Every key must be known and of its field's type, so a typo or a
// wrong value fails at start-up with the file, the line, the key and a suggestion, never mid-run.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "trainer/common/edit_distance.h"
#include "trainer/common/error.h"
#include "trainer/config/config.h"
#include "trainer/config/fields.h"

namespace tandem::config {
namespace {

using FieldRef =
    std::variant<int64_t*, uint64_t*, double*, bool*, std::string*, Schedule*, Device*, Precision*,
                 BasePrecision*, Activation*, PositionLayout*, std::vector<CorpusWeight>*,
                 ValidMetricChoice*>;

struct Field {
  std::string path;  // "model.d_model"
  FieldRef ref;
  bool takes_auto = false;  // an integer that may also be spelled auto (detail::takes_auto)
};

std::vector<Field> fields_of(Config& config) {
  std::vector<Field> fields;
  detail::for_each_field(config, [&](const char* section, const char* key, auto& value) {
    fields.push_back(
        {std::string(section) + "." + key, &value, detail::takes_auto(section, key)});
  });
  return fields;
}

// The top-level sections (a section inside one, "train.alignment", is its parent's).
std::vector<std::string> section_names() {
  Config unused;
  std::vector<std::string> sections;
  detail::for_each_field(unused, [&](const char* section, const char*, auto&) {
    const std::string top = std::string(section).substr(0, std::string(section).find('.'));
    if (std::find(sections.begin(), sections.end(), top) == sections.end()) {
      sections.push_back(top);
    }
  });
  return sections;
}

// Whether `path` names a section inside a section: the start of some key's path.
bool is_inner_section(const std::string& path, const std::vector<Field>& fields) {
  return std::any_of(fields.begin(), fields.end(), [&](const Field& field) {
    return field.path.compare(0, path.size() + 1, path + ".") == 0;
  });
}

// Where an error happened: "tiny.yaml:12" for a file's nodes, "tiny.yaml: --set 'k=v'" for
// overrides.
struct Origin {
  std::string source;
  std::string override_text;  // empty when reading the document itself

  std::string at(const YAML::Mark& mark) const {
    if (!override_text.empty()) return source + ": --set '" + override_text + "'";
    if (mark.line < 0) return source;
    return source + ":" + std::to_string(mark.line + 1);
  }
  [[noreturn]] void fail(const YAML::Mark& mark, const std::string& problem) const {
    throw std::invalid_argument(at(mark) + ": " + problem);
  }
};

std::string leaf_of(const std::string& path) { return path.substr(path.rfind('.') + 1); }

// The known key a user most likely meant: the same key name under another section first (a key
// put in the wrong section), else the nearest full path by edit distance.
std::string suggest_key(const std::string& path, const std::vector<Field>& fields) {
  for (const Field& field : fields) {
    if (leaf_of(field.path) == leaf_of(path)) return field.path;
  }
  const Field* best = &fields.front();
  for (const Field& field : fields) {
    if (edit_distance(path, field.path) < edit_distance(path, best->path)) best = &field;
  }
  return best->path;
}

// A top-level name that is a key name suggests that key's full path (a missing section header).
std::string suggest_section(const std::string& name, const std::vector<Field>& fields) {
  for (const Field& field : fields) {
    if (leaf_of(field.path) == name) return field.path;
  }
  const std::vector<std::string> sections = section_names();
  std::string best = sections.front();
  for (const std::string& section : sections) {
    if (edit_distance(name, section) < edit_distance(name, best)) best = section;
  }
  return best;
}

Field& find_field(std::vector<Field>& fields, const std::string& path, const Origin& origin,
                  const YAML::Mark& mark) {
  for (Field& field : fields) {
    if (field.path == path) return field;
  }
  origin.fail(mark, "unknown key " + path + " (did you mean " + suggest_key(path, fields) + "?)");
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar:
      return node.Tag() == "!" ? "the quoted string '" + node.Scalar() + "'"
                               : "'" + node.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a mapping";
    default:
      return "nothing";
  }
}

// Text of a plain (unquoted) scalar, or nullptr: numbers and booleans must not be quoted.
const std::string* plain_scalar(const YAML::Node& node) {
  if (!node.IsScalar() || node.Tag() == "!") return nullptr;
  return &node.Scalar();
}

template <class Int>
bool parse_integer(const std::string& text, Int* out) {
  static const std::regex kInteger("[-+]?[0-9]+");
  if (!std::regex_match(text, kInteger)) return false;
  const char* begin = text.data() + (text[0] == '+' ? 1 : 0);
  const auto [end, error] = std::from_chars(begin, text.data() + text.size(), *out);
  return error == std::errc() && end == text.data() + text.size();
}

// YAML 1.2 core-schema floats: 3, 3.0, .5, 3e-4, -1.5E+2, .inf, -.inf, .nan.
bool parse_double(const std::string& text, double* out) {
  static const std::regex kFloat("[-+]?(\\.[0-9]+|[0-9]+(\\.[0-9]*)?)([eE][-+]?[0-9]+)?");
  static const std::regex kInf("[-+]?\\.(inf|Inf|INF)");
  static const std::regex kNan("\\.(nan|NaN|NAN)");
  if (std::regex_match(text, kInf)) {
    *out = text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (std::regex_match(text, kNan)) {
    *out = std::nan("");
    return true;
  }
  if (!std::regex_match(text, kFloat)) return false;
  std::istringstream stream(text);
  stream.imbue(std::locale::classic());
  return static_cast<bool>(stream >> *out);
}

// Each assign_* returns what was expected when the node does not fit, or "" on success.
std::string assign(const YAML::Node& node, int64_t* field) {
  const std::string* text = plain_scalar(node);
  return text != nullptr && parse_integer(*text, field) ? "" : "an integer";
}

std::string assign(const YAML::Node& node, uint64_t* field) {
  const std::string* text = plain_scalar(node);
  return text != nullptr && parse_integer(*text, field) ? "" : "a non-negative integer";
}

std::string assign(const YAML::Node& node, double* field) {
  const std::string* text = plain_scalar(node);
  return text != nullptr && parse_double(*text, field) ? "" : "a number";
}

std::string assign(const YAML::Node& node, bool* field) {
  static const std::regex kTrue("true|True|TRUE"), kFalse("false|False|FALSE");
  const std::string* text = plain_scalar(node);
  if (text == nullptr) return "true or false";
  if (std::regex_match(*text, kTrue) || std::regex_match(*text, kFalse)) {
    *field = std::regex_match(*text, kTrue);
    return "";
  }
  return "true or false";
}

std::string assign(const YAML::Node& node, std::string* field) {
  if (!node.IsScalar()) return "a string";
  *field = node.Scalar();
  return "";
}

// A closed set's spelling, quoted or not ("schedule: inverse_sqrt").
template <class Enum, class = std::enable_if_t<std::is_enum_v<Enum>>>
std::string assign(const YAML::Node& node, Enum* field) {
  return node.IsScalar() && detail::resolve(node.Scalar(), field) ? "" : detail::one_of<Enum>();
}

// The compound values' assign_* throw std::invalid_argument, naming the key, for text of their
// kind that says something wrong ("en-es:-1").

// data.weights: "name:weight,name:weight", or a mapping of name: weight.
std::string assign(const YAML::Node& node, std::vector<CorpusWeight>* field) {
  if (node.IsScalar()) {
    *field = parse_corpus_weights(node.Scalar());
    return "";
  }
  if (!node.IsMap()) return "name:weight,name:weight or a mapping of name: weight";
  std::vector<CorpusWeight> weights;
  for (const auto& entry : node) {
    const std::string* number = plain_scalar(entry.second);
    const std::string name = entry.first.IsScalar() ? entry.first.Scalar() : "";
    if (number == nullptr) {
      throw std::invalid_argument("data.weights: '" + name + "': expected a number, got " +
                                  describe(entry.second));
    }
    detail::add_corpus_weight(weights, name, *number, name + ": " + *number);
  }
  *field = std::move(weights);
  return "";
}

std::string assign(const YAML::Node& node, ValidMetricChoice* field) {
  if (!node.IsScalar()) return "a figure such as bleu, mean_bleu or es-en_bleu";
  *field = parse_valid_metric(node.Scalar());
  return "";
}

void assign_field(const Field& field, const YAML::Node& value, const Origin& origin,
                  const YAML::Mark& mark) {
  if (field.takes_auto) {
    const std::string* text = plain_scalar(value);
    if (text != nullptr && *text == "auto") {
      *std::get<int64_t*>(field.ref) = kAutoMaxTokens;
      return;
    }
  }
  std::string expected;
  try {
    expected = std::visit([&](auto* target) { return assign(value, target); }, field.ref);
  } catch (const std::invalid_argument& e) {
    origin.fail(mark, e.what());
  }
  if (!expected.empty()) {
    if (field.takes_auto) expected += " or auto";
    origin.fail(mark, field.path + ": expected " + expected + ", got " + describe(value));
  }
}

void read_section(const std::string& section, const YAML::Node& body, std::vector<Field>& fields,
                  const Origin& origin, const YAML::Mark& mark) {
  if (body.IsNull()) return;  // "model:" with nothing under it keeps the defaults
  if (!body.IsMap())
    origin.fail(mark, section + ": expected a mapping of keys, got " + describe(body));
  std::set<std::string> seen;
  for (const auto& entry : body) {
    const std::string path = section + "." + entry.first.Scalar();
    const YAML::Mark key_mark = entry.first.Mark();
    if (!seen.insert(path).second) origin.fail(key_mark, path + ": given twice");
    if (is_inner_section(path, fields)) {
      read_section(path, entry.second, fields, origin, key_mark);
      continue;
    }
    assign_field(find_field(fields, path, origin, key_mark), entry.second, origin, key_mark);
  }
}

void read_document(const YAML::Node& root, Config& config, const Origin& origin) {
  if (root.IsNull()) return;
  if (!root.IsMap())
    origin.fail(root.Mark(), "expected a mapping of sections, got " + describe(root));
  std::vector<Field> fields = fields_of(config);
  const std::vector<std::string> sections = section_names();
  std::set<std::string> seen;
  for (const auto& entry : root) {
    const std::string name = entry.first.Scalar();
    const YAML::Mark mark = entry.first.Mark();
    if (std::find(sections.begin(), sections.end(), name) == sections.end()) {
      origin.fail(mark, "unknown section '" + name + "' (did you mean " +
                            suggest_section(name, fields) + "?)");
    }
    if (!seen.insert(name).second) origin.fail(mark, name + ": section given twice");
    read_section(name, entry.second, fields, origin, mark);
  }
}

YAML::Node load_yaml(const std::string& text, const std::string& where) {
  try {
    return YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw std::invalid_argument(where + ":" + std::to_string(e.mark.line + 1) + ":" +
                                std::to_string(e.mark.column + 1) +
                                ": YAML syntax error: " + e.msg);
  }
}

// "train.lr=3e-4": the value is read as a YAML scalar, so it is typed exactly as in the file.
void apply_override(const std::string& text, const std::string& source, Config& config) {
  const Origin origin{source, text};
  const size_t equals = text.find('=');
  if (equals == std::string::npos) origin.fail(YAML::Mark::null_mark(), "expected key.path=value");
  const std::string path = text.substr(0, equals);
  YAML::Node value;
  try {
    value = YAML::Load(text.substr(equals + 1));
  } catch (const YAML::ParserException& e) {
    origin.fail(YAML::Mark::null_mark(), path + ": the value is not valid YAML (" + e.msg + ")");
  }
  std::vector<Field> fields = fields_of(config);
  assign_field(find_field(fields, path, origin, YAML::Mark::null_mark()), value, origin,
               YAML::Mark::null_mark());
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides) {
  Config config;
  read_document(load_yaml(yaml_text, source), config, Origin{source, ""});
  for (const std::string& text : overrides) apply_override(text, source, config);
  try {
    validate(config);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(source + ": " + e.what());
  }
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw_cannot_open("config", path);
  std::ostringstream text;
  text << file.rdbuf();
  if (file.bad()) throw std::runtime_error("config: error reading '" + path + "'");
  return parse_config(text.str(), path, overrides);
}

}  // namespace tandem::config
