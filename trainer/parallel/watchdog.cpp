#include "trainer/parallel/watchdog.h"

#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

#include "trainer/common/error.h"
#include "trainer/common/log.h"
#include "trainer/jobs/rank_state.h"

namespace tandem::parallel {
namespace {

void check_timeout(double seconds) {
  if (!(seconds > 0)) {
    throw std::invalid_argument("Watchdog: timeout " + std::to_string(seconds) +
                                " s: expected a number of seconds > 0");
  }
}

// The one place library code ends the process, because nothing else can: the main thread is
// blocked inside MPI, and under MPI_THREAD_FUNNELED this thread may not call MPI (MPI_Abort
// included). A non-zero exit without MPI_Finalize makes mpirun kill the other ranks and fail.
[[noreturn]] void log_and_exit(const std::string& message) {
  log::error(message);
  jobs::rank_state::end(jobs::RankState::Outcome::kTimedOut, -1, kExitFailure, 0, message);
  std::fflush(nullptr);
  std::_Exit(kExitFailure);
}

}  // namespace

Watchdog::Watchdog(double timeout_s, Handler on_timeout)
    : on_timeout_(on_timeout ? std::move(on_timeout) : Handler(log_and_exit)),
      timeout_s_(timeout_s) {
  check_timeout(timeout_s);
}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Watchdog::set_timeout(double seconds) {
  check_timeout(seconds);
  std::lock_guard<std::mutex> lock(mutex_);
  timeout_s_ = seconds;
}

double Watchdog::timeout() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return timeout_s_;
}

Watchdog::Watch Watchdog::watch(const char* name, uint64_t sequence) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
    armed_ = true;
    name_ = name;
    sequence_ = sequence;
    deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                   std::chrono::duration<double>(timeout_s_));
    // The thread sleeps until an older deadline (or, idle, forever); wake it only if this one
    // comes sooner, so back-to-back collectives cost a lock each and no thread switch.
    wake = deadline_ < sleeping_until_;
  }
  if (wake) wake_.notify_one();
  return Watch(*this);
}

void Watchdog::disarm() {
  std::lock_guard<std::mutex> lock(mutex_);
  armed_ = false;
}

void Watchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (!armed_) {
      wake_.wait(lock);
      continue;
    }
    if (Clock::now() < deadline_) {
      sleeping_until_ = deadline_;
      wake_.wait_until(lock, deadline_);
      sleeping_until_ = Clock::time_point::max();
      continue;
    }
    std::ostringstream message;
    message << "collective " << name_ << " #" << sequence_ << " did not complete within "
            << timeout_s_ << " s; a peer is dead or stuck";
    armed_ = false;  // one report per wait (a test handler returns)
    lock.unlock();
    on_timeout_(message.str());
    lock.lock();
  }
}

}  // namespace tandem::parallel
