// Learning-rate schedules as pure functions of the step, so resuming needs no schedule state.
#include "trainer/optim/schedule.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace tandem::optim {

double learning_rate(const ScheduleOptions& options, int64_t step) {
  // Step 0 (before the first update, e.g. a checkpoint written at start) is allowed: the warmup
  // formula gives 0 there, and the plain lr without warmup.
  if (step < 0) throw std::invalid_argument("learning_rate: step " + std::to_string(step) + " < 0");
  const double warmup = static_cast<double>(options.warmup_steps);
  const double t = static_cast<double>(step);
  switch (options.kind) {
    case config::Schedule::kConstant:
      return t < warmup ? options.lr * t / warmup : options.lr;
    case config::Schedule::kInverseSqrt:
      if (options.warmup_steps < 1) {
        throw std::invalid_argument(
            "learning_rate: schedule inverse_sqrt needs warmup_steps >= 1, got " +
            std::to_string(options.warmup_steps));
      }
      return t <= warmup ? options.lr * t / warmup : options.lr * std::sqrt(warmup / t);
  }
  throw std::logic_error("learning_rate: unknown schedule");
}

}  // namespace tandem::optim
