// Learning-rate schedules: constant (with optional linear warmup) and inverse square root
// (fairseq's: linear warmup to lr over warmup steps, then lr * sqrt(warmup / step)).
#pragma once

#include <cstdint>

#include "trainer/config/config.h"

namespace tandem::optim {

struct ScheduleOptions {
  config::Schedule kind = config::Schedule::kConstant;
  double lr = 3.0e-4;
  int64_t warmup_steps = 0;  // >= 1 for inverse_sqrt
};

// The learning rate of optimizer step `step` (1-based; 0, before any update, is allowed). A pure
// function of (options, step), so the schedule's state in a checkpoint is just the step.
double learning_rate(const ScheduleOptions& options, int64_t step);

}  // namespace tandem::optim
