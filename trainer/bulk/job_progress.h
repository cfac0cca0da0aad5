// What rank 0 of a chunked job says while it runs and when it ends: a progress line at most every
// `interval_s` (chunks done, lines done, lines/s, ETA), and the summary, as text and as the record
// kept beside the output.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace tandem::bulk {

class JobProgress {
 public:
  // The job has `chunks` chunks of `lines` lines in all, of which `chunks_done` (with
  // `lines_done` lines) were done before this run.
  JobProgress(std::string tool, int64_t chunks, int64_t lines, int64_t chunks_done,
              int64_t lines_done, double interval_s);

  // The first chunk was handed out: the rate is measured from here (after the models loaded).
  void start();
  // A chunk of `lines` lines is done; prints the progress line when it is due (and at the last).
  void chunk_done(int64_t lines);

  // Lines per second over this run's chunks.
  double lines_per_s() const;
  double elapsed_s() const;
  // "60000 lines in 30 chunks (12 done before this run, 1 redone), 512.3 lines/s on 2 rank(s)
  // in 1m57s"; `record` gets the same figures.
  std::string summary(int ranks, int64_t redone, nlohmann::json& record) const;

 private:
  using Clock = std::chrono::steady_clock;
  std::string line() const;

  std::string tool_;
  int64_t chunks_, lines_, chunks_before_, lines_before_;
  int64_t chunks_now_ = 0, lines_now_ = 0;
  double interval_s_;
  Clock::time_point begun_ = Clock::now(), started_ = begun_, printed_ = begun_;
  bool started_yet_ = false;
};

}  // namespace tandem::bulk
