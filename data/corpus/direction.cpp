#include "data/corpus/direction.h"

#include <utility>

namespace tandem::data {

const PairRange* Direction::range(const std::string& split) const {
  const auto found = splits.find(split);
  return found == splits.end() ? nullptr : &found->second;
}

std::string language_tag(const std::string& language) { return ">>" + language + "<<"; }

Directions::Directions(std::vector<Direction> directions) : all_(std::move(directions)) {}

const Direction* Directions::find(const std::string& name) const {
  for (const Direction& direction : all_) {
    if (direction.name == name) return &direction;
  }
  return nullptr;
}

std::vector<std::string> Directions::names() const {
  std::vector<std::string> names;
  if (!several()) return names;
  for (const Direction& direction : all_) names.push_back(direction.name);
  return names;
}

std::string Directions::listed() const {
  std::string text;
  for (const Direction& direction : all_) {
    text += (text.empty() ? "" : ", ") + direction.name;
  }
  return text.empty() ? "one, unnamed" : text;
}

}  // namespace tandem::data
