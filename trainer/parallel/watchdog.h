// A deadline for blocking collectives: a dead or stuck peer would otherwise leave every other rank
// waiting forever. One thread per watchdog, asleep unless a wait is armed; arming is a mutex.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace tandem::parallel {

class Watchdog {
 public:
  static constexpr double kDefaultTimeoutS = 300.0;
  // Gets "collective <name> #<k> did not complete within <T> s; a peer is dead or stuck".
  using Handler = std::function<void(const std::string& message)>;

  // Without a handler, a timeout logs the message as this rank's error and ends the process
  // (see watchdog.cpp for why it cannot be MPI_Abort).
  explicit Watchdog(double timeout_s = kDefaultTimeoutS, Handler on_timeout = {});
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // Seconds a blocking wait may take (> 0); applies to waits armed from now on.
  void set_timeout(double seconds);
  double timeout() const;

  // Armed while alive: one blocking wait for collective `name`, the `sequence`-th of its
  // communicator. One at a time (the waits of one thread).
  class Watch {
   public:
    explicit Watch(Watchdog& dog) : dog_(dog) {}
    ~Watch() { dog_.disarm(); }
    Watch(const Watch&) = delete;
    Watch& operator=(const Watch&) = delete;

   private:
    Watchdog& dog_;
  };
  [[nodiscard]] Watch watch(const char* name, uint64_t sequence);

 private:
  using Clock = std::chrono::steady_clock;
  void disarm();
  void run();

  Handler on_timeout_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::thread thread_;  // started by the first watch()
  double timeout_s_;
  bool stopping_ = false;
  bool armed_ = false;
  const char* name_ = "";
  uint64_t sequence_ = 0;
  Clock::time_point deadline_;
  Clock::time_point sleeping_until_ = Clock::time_point::max();  // the thread's wake-up time
};

}  // namespace tandem::parallel
