// Scoring each direction of a corpus of several, once for validation in training and for
// tandem-eval: which pairs of a split are evaluated and where each direction's lie among them,
// each direction's teacher-forced figures over a process's share of them, and each one's BLEU and
// chrF2 over all the translations.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/corpus/corpus.h"
#include "data/corpus/direction.h"
#include "trainer/decode/ensemble.h"
#include "trainer/eval/evaluate.h"

namespace tandem::eval {

// A direction's pairs among those evaluated: positions [begin, end).
struct DirectionSlice {
  std::string name;
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// The pairs of a split to evaluate, in order (indices into the split), and where each direction's
// lie among them.
struct EvaluatedPairs {
  std::vector<int64_t> indices;
  std::vector<DirectionSlice> slices;  // with several directions, or one named by `only`
};

// The pairs of `split` to evaluate: with several directions, each one's that has the split, its
// first `cap` pairs (0: all), one direction after another; with `only` (a direction's name), that
// direction's alone (std::invalid_argument naming it, the split and the file's directions when it
// has none there); else the split's first `cap`, without slices.
EvaluatedPairs evaluated_pairs(const data::Directions& directions, const std::string& split,
                               int64_t cap, const std::string& only = "");

// Each slice's teacher-forced figures over this process's share of the pairs evaluated: `pairs`,
// the k-th of which is at position first + k * stride among them (one process: 0 and 1; rank r of
// N taking every N-th: r and N).
std::vector<TeacherForced> teacher_forced_by_direction(const decode::Ensemble& ensemble,
                                                       const std::vector<data::SentencePair>& pairs,
                                                       const std::vector<DirectionSlice>& slices,
                                                       int64_t first, int64_t stride,
                                                       int64_t max_tokens);

// Corpus BLEU and chrF2 of a set of translations.
struct Quality {
  double bleu = 0;
  double chrf = 0;
};

// Each slice's quality: its part of `hypotheses` against its part of `references` (both of every
// pair evaluated, in order).
std::vector<Quality> quality_by_direction(const std::vector<DirectionSlice>& slices,
                                          const std::vector<std::string>& hypotheses,
                                          const std::vector<std::string>& references);

// The mean of the directions' BLEU and of their chrF2 (each direction counts once, whatever its
// size); zeros for none.
Quality mean_quality(const std::vector<Quality>& directions);

}  // namespace tandem::eval
