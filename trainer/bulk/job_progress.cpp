#include "trainer/bulk/job_progress.h"

#include <cstdio>
#include <utility>

#include "trainer/common/timestamp.h"

namespace tandem::bulk {
namespace {

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

JobProgress::JobProgress(std::string tool, int64_t chunks, int64_t lines, int64_t chunks_done,
                         int64_t lines_done, double interval_s)
    : tool_(std::move(tool)),
      chunks_(chunks),
      lines_(lines),
      chunks_before_(chunks_done),
      lines_before_(lines_done),
      interval_s_(interval_s) {}

void JobProgress::start() {
  if (started_yet_) return;
  started_yet_ = true;
  started_ = printed_ = Clock::now();
}

double JobProgress::lines_per_s() const {
  const double s = seconds(Clock::now() - started_);
  return s > 0 ? static_cast<double>(lines_now_) / s : 0;
}

double JobProgress::elapsed_s() const { return seconds(Clock::now() - begun_); }

void JobProgress::chunk_done(int64_t lines) {
  ++chunks_now_;
  lines_now_ += lines;
  const bool last = chunks_before_ + chunks_now_ == chunks_;
  if (!last && seconds(Clock::now() - printed_) < interval_s_) return;
  printed_ = Clock::now();
  std::fprintf(stderr, "%s\n", line().c_str());
  std::fflush(stderr);
}

std::string JobProgress::line() const {
  const double rate = lines_per_s();
  const int64_t left = lines_ - lines_before_ - lines_now_;
  char text[256];
  std::snprintf(text, sizeof text,
                "%s: chunk %lld/%lld | %lld/%lld lines | %.1f lines/s | %s | ETA %s", tool_.c_str(),
                static_cast<long long>(chunks_before_ + chunks_now_),
                static_cast<long long>(chunks_), static_cast<long long>(lines_before_ + lines_now_),
                static_cast<long long>(lines_), rate, format_duration(elapsed_s()).c_str(),
                rate > 0 ? format_duration(static_cast<double>(left) / rate).c_str() : "?");
  return text;
}

std::string JobProgress::summary(int ranks, int64_t redone, nlohmann::json& record) const {
  record = {{"lines", lines_},
            {"chunks", chunks_},
            {"chunks_before", chunks_before_},
            {"chunks_this_run", chunks_now_},
            {"redone", redone},
            {"ranks", ranks},
            {"lines_per_s", lines_per_s()},
            {"seconds", elapsed_s()}};
  char text[256];
  std::snprintf(text, sizeof text,
                "%lld lines in %lld chunks (%lld done before this run, %lld redone), %.1f lines/s "
                "on %d rank(s) in %s",
                static_cast<long long>(lines_), static_cast<long long>(chunks_),
                static_cast<long long>(chunks_before_), static_cast<long long>(redone),
                lines_per_s(), ranks, format_duration(elapsed_s()).c_str());
  return text;
}

}  // namespace tandem::bulk
