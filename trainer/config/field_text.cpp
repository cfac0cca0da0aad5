// The text forms of the config's two compound values, data.weights and valid.metric: read once
// when the config is parsed, written back by to_yaml in a form that reads back the same.
#include <cmath>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/config/config.h"
#include "trainer/config/fields.h"

namespace tandem::config {
namespace {

std::string trimmed(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") + 1 - begin);
}

}  // namespace

namespace detail {

void add_corpus_weight(std::vector<CorpusWeight>& weights, const std::string& name,
                       const std::string& number, const std::string& entry) {
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("data.weights: '" + entry + "': " + why);
  };
  if (name.empty()) throw bad("expected name:weight");
  char* stop = nullptr;
  const double weight = std::strtod(number.c_str(), &stop);
  if (trimmed(number).empty() || !trimmed(stop).empty() || !std::isfinite(weight) ||
      !(weight > 0)) {
    throw bad("the weight is not a positive number");
  }
  for (const CorpusWeight& seen : weights) {
    if (seen.corpus == name) throw bad("corpus '" + name + "' is weighted twice");
  }
  weights.push_back({name, weight});
}

}  // namespace detail

std::vector<CorpusWeight> parse_corpus_weights(const std::string& text) {
  std::vector<CorpusWeight> weights;
  if (trimmed(text).empty()) return weights;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string entry = trimmed(text.substr(begin, end - begin));
    const size_t colon = entry.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      throw std::invalid_argument("data.weights: '" + entry + "': expected name:weight");
    }
    detail::add_corpus_weight(weights, trimmed(entry.substr(0, colon)), entry.substr(colon + 1),
                              entry);
    begin = end + 1;
  }
  return weights;
}

std::string to_text(const std::vector<CorpusWeight>& weights) {
  std::string text;
  for (const CorpusWeight& entry : weights) {
    text += (text.empty() ? "" : ",") + entry.corpus + ":" + detail::shortest_decimal(entry.weight);
  }
  return text;
}

ValidMetricChoice parse_valid_metric(const std::string& text) {
  ValidMetricChoice choice;
  const size_t underscore = text.rfind('_');
  const std::string figure = underscore == std::string::npos ? text : text.substr(underscore + 1);
  if (underscore != std::string::npos) choice.over = text.substr(0, underscore);
  if (!detail::resolve(figure, &choice.figure) ||
      (underscore != std::string::npos && choice.over.empty())) {
    throw std::invalid_argument(
        "valid.metric: expected " + detail::one_of<ValidMetric>() +
        ", of the whole valid split, or mean_<figure> or <corpus>_<figure> with several corpora, "
        "got '" +
        text + "'");
  }
  return choice;
}

std::string to_text(const ValidMetricChoice& metric) {
  const std::string figure = name_of(metric.figure);
  return metric.over.empty() ? figure : metric.over + "_" + figure;
}

}  // namespace tandem::config
