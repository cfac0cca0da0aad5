// How the decoding benchmarks time a run: wall and CPU seconds, the translations' tokens and
// words, and the median of repeated runs.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/vocab/vocab.h"

namespace tandem::bench {

using Sentences = std::vector<std::vector<int32_t>>;

inline double cpu_seconds(const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; }

struct Timing {
  int64_t tokens = 0;
  int64_t words = 0;
  double wall = 0, user = 0, sys = 0;
  std::vector<std::string> text;  // the detokenized translations
  double words_per_second() const { return wall > 0 ? words / wall : 0; }
  double tokens_per_second() const { return wall > 0 ? tokens / wall : 0; }
  nlohmann::json json() const {
    return {{"wall_s", wall},
            {"user_s", user},
            {"sys_s", sys},
            {"words", words},
            {"tokens", tokens},
            {"words_per_s", words_per_second()},
            {"tokens_per_s", tokens_per_second()}};
  }
};

// The translations' text and their target tokens and words, into `t`.
inline void count_outputs(Timing& t, const data::Vocab& vocab, const Sentences& outputs) {
  for (const auto& tokens : outputs) {
    t.tokens += static_cast<int64_t>(tokens.size());
    t.text.push_back(vocab.decode(tokens, data::Side::kTarget));
    std::istringstream text(t.text.back());
    for (std::string word; text >> word;) ++t.words;
  }
}

// One run of decode(), timed.
template <class Decode>
Timing timed_once(const data::Vocab& vocab, Decode&& decode) {
  rusage before{}, after{};
  getrusage(RUSAGE_SELF, &before);
  const auto start = std::chrono::steady_clock::now();
  const Sentences outputs = decode();
  Timing t;
  t.wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  getrusage(RUSAGE_SELF, &after);
  t.user = cpu_seconds(after.ru_utime) - cpu_seconds(before.ru_utime);
  t.sys = cpu_seconds(after.ru_stime) - cpu_seconds(before.ru_stime);
  count_outputs(t, vocab, outputs);
  return t;
}

// The run with the median wall time (the upper one of an even count).
inline Timing median_run(std::vector<Timing> runs) {
  std::sort(runs.begin(), runs.end(),
            [](const Timing& a, const Timing& b) { return a.wall < b.wall; });
  return runs[runs.size() / 2];
}

// Each runner's median of `repeat` runs, the runners taking turns within each round (0, 1, ..,
// 0, 1, ..) so that a machine that speeds up or slows down meanwhile moves them all alike.
inline std::vector<Timing> alternating_medians(
    int repeat, const std::vector<std::function<Timing()>>& runners) {
  std::vector<std::vector<Timing>> runs(runners.size());
  for (int r = 0; r < repeat; ++r) {
    for (size_t i = 0; i < runners.size(); ++i) runs[i].push_back(runners[i]());
  }
  std::vector<Timing> medians;
  for (auto& one : runs) medians.push_back(median_run(std::move(one)));
  return medians;
}

// `repeat` runs of decode(); the one with the median wall time.
template <class Decode>
Timing timed(const data::Vocab& vocab, int repeat, Decode&& decode) {
  std::vector<Timing> runs;
  for (int i = 0; i < repeat; ++i) runs.push_back(timed_once(vocab, decode));
  return median_run(std::move(runs));
}

}  // namespace tandem::bench
