#include "trainer/eval/direction_scores.h"

#include <algorithm>
#include <stdexcept>

#include "trainer/bleu/bleu_chrf.h"

namespace tandem::eval {
namespace {

// Appends the first `cap` (0: all) pairs of `range` to `out`; returns its slice.
DirectionSlice take(const std::string& name, const data::PairRange& range, int64_t cap,
                    EvaluatedPairs& out) {
  const int64_t count = cap > 0 ? std::min(range.count, cap) : range.count;
  DirectionSlice slice{name, static_cast<int64_t>(out.indices.size()), 0};
  for (int64_t i = 0; i < count; ++i) out.indices.push_back(range.first + i);
  slice.end = static_cast<int64_t>(out.indices.size());
  return slice;
}

}  // namespace

EvaluatedPairs evaluated_pairs(const data::Directions& directions, const std::string& split,
                               int64_t cap, const std::string& only) {
  EvaluatedPairs out;
  if (!only.empty()) {
    const data::Direction* direction = directions.find(only);
    const data::PairRange* range = direction == nullptr ? nullptr : direction->range(split);
    if (range == nullptr) {
      throw std::invalid_argument("no such corpus with a " + split +
                                  " split (its corpora: " + directions.listed() + ")");
    }
    out.slices.push_back(take(only, *range, cap, out));
    return out;
  }
  for (const data::Direction& direction : directions) {
    const data::PairRange* range = direction.range(split);
    if (range == nullptr) continue;
    const DirectionSlice slice = take(direction.name, *range, cap, out);
    if (directions.several()) out.slices.push_back(slice);
  }
  return out;
}

std::vector<TeacherForced> teacher_forced_by_direction(const decode::Ensemble& ensemble,
                                                       const std::vector<data::SentencePair>& pairs,
                                                       const std::vector<DirectionSlice>& slices,
                                                       int64_t first, int64_t stride,
                                                       int64_t max_tokens) {
  std::vector<TeacherForced> figures;
  for (const DirectionSlice& slice : slices) {
    std::vector<data::SentencePair> share;
    for (size_t k = 0; k < pairs.size(); ++k) {
      const int64_t position = first + static_cast<int64_t>(k) * stride;
      if (position >= slice.begin && position < slice.end) share.push_back(pairs[k]);
    }
    figures.push_back(teacher_forced(ensemble, std::move(share), max_tokens));
  }
  return figures;
}

std::vector<Quality> quality_by_direction(const std::vector<DirectionSlice>& slices,
                                          const std::vector<std::string>& hypotheses,
                                          const std::vector<std::string>& references) {
  std::vector<Quality> qualities;
  for (const DirectionSlice& slice : slices) {
    const auto begin = static_cast<std::ptrdiff_t>(slice.begin);
    const auto end = static_cast<std::ptrdiff_t>(slice.end);
    const std::vector<std::string> hyps(hypotheses.begin() + begin, hypotheses.begin() + end);
    const std::vector<std::string> refs(references.begin() + begin, references.begin() + end);
    qualities.push_back({corpus_bleu(hyps, refs).score, corpus_chrf(hyps, refs)});
  }
  return qualities;
}

Quality mean_quality(const std::vector<Quality>& directions) {
  Quality mean;
  if (directions.empty()) return mean;
  for (const Quality& quality : directions) {
    mean.bleu += quality.bleu;
    mean.chrf += quality.chrf;
  }
  mean.bleu /= static_cast<double>(directions.size());
  mean.chrf /= static_cast<double>(directions.size());
  return mean;
}

}  // namespace tandem::eval
