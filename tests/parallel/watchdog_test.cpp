// The watchdog alone, without MPI: a wait that outlives its timeout is reported once, by the
// collective's name and number; waits that end in time never are. (Its default action, ending
// the process, is checked under mpirun by watchdog_stuck_peer.sh.)
#include "trainer/parallel/watchdog.h"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace tandem::parallel {
namespace {

class Reports {
 public:
  Watchdog::Handler handler() {
    return [this](const std::string& message) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        messages_.push_back(message);
      }
      changed_.notify_all();
    };
  }
  // Blocks until there are `count` reports (a bound for a failing test, not a sleep).
  std::vector<std::string> wait_for(size_t count) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait_for(lock, std::chrono::seconds(30), [&] { return messages_.size() >= count; });
    return messages_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> messages_;
};

std::string report(const std::string& name, int sequence, const std::string& seconds) {
  return "collective " + name + " #" + std::to_string(sequence) + " did not complete within " +
         seconds + " s; a peer is dead or stuck";
}

TEST(Watchdog, ReportsOnlyWaitsThatOutliveTheTimeoutOnceEach) {
  Reports reports;
  Watchdog dog(60.0, reports.handler());
  for (uint64_t k = 1; k <= 1000; ++k) {
    const auto in_time = dog.watch("barrier", k);
  }
  // The thread now sleeps until about a minute from now; a shorter deadline must wake it.
  dog.set_timeout(0.05);
  EXPECT_DOUBLE_EQ(dog.timeout(), 0.05);
  {
    const auto stuck = dog.watch("all_reduce_sum", 1001);
    EXPECT_EQ(reports.wait_for(1),
              std::vector<std::string>{report("all_reduce_sum", 1001, "0.05")});
  }
  {
    const auto stuck = dog.watch("all_reduce_sum_async", 1002);
    EXPECT_EQ(reports.wait_for(2),
              (std::vector<std::string>{report("all_reduce_sum", 1001, "0.05"),
                                        report("all_reduce_sum_async", 1002, "0.05")}));
  }
}

TEST(Watchdog, RejectsTimeoutsThatAreNotPositive) {
  EXPECT_THROW(Watchdog(0.0), std::invalid_argument);
  Watchdog dog;
  EXPECT_DOUBLE_EQ(dog.timeout(), Watchdog::kDefaultTimeoutS);
  EXPECT_THROW(dog.set_timeout(-1.0), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::parallel
