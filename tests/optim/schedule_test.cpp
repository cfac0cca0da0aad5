#include "trainer/optim/schedule.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace tandem::optim {
namespace {

TEST(Schedule, ConstantWithoutWarmupIsFlat) {
  const ScheduleOptions options{config::Schedule::kConstant, 3e-4, 0};
  EXPECT_DOUBLE_EQ(learning_rate(options, 1), 3e-4);
  EXPECT_DOUBLE_EQ(learning_rate(options, 1000000), 3e-4);
}

TEST(Schedule, ConstantWarmsUpLinearly) {
  const ScheduleOptions options{config::Schedule::kConstant, 1e-3, 10};
  EXPECT_DOUBLE_EQ(learning_rate(options, 1), 1e-4);
  EXPECT_DOUBLE_EQ(learning_rate(options, 5), 5e-4);
  EXPECT_DOUBLE_EQ(learning_rate(options, 10), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(options, 11), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(options, 5000), 1e-3);
}

TEST(Schedule, InverseSqrtWarmsUpThenDecays) {
  const ScheduleOptions options{config::Schedule::kInverseSqrt, 7e-4, 4000};
  EXPECT_DOUBLE_EQ(learning_rate(options, 1), 1.75e-7);              // 7e-4 * 1 / 4000
  EXPECT_DOUBLE_EQ(learning_rate(options, 2000), 3.5e-4);            // half way up
  EXPECT_DOUBLE_EQ(learning_rate(options, 4000), 7e-4);              // the peak
  EXPECT_DOUBLE_EQ(learning_rate(options, 16000), 3.5e-4);           // 7e-4 * sqrt(1/4)
  EXPECT_DOUBLE_EQ(learning_rate(options, 64000), 1.75e-4);          // 7e-4 * sqrt(1/16)
  EXPECT_DOUBLE_EQ(learning_rate(options, 9000), 7e-4 * 2.0 / 3.0);  // sqrt(4000/9000) = 2/3
}

TEST(Schedule, StepZeroIsTheStartOfWarmup) {
  EXPECT_DOUBLE_EQ(learning_rate({config::Schedule::kConstant, 1e-3, 0}, 0), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate({config::Schedule::kConstant, 1e-3, 10}, 0), 0.0);
  EXPECT_DOUBLE_EQ(learning_rate({config::Schedule::kInverseSqrt, 1e-3, 10}, 0), 0.0);
}

TEST(Schedule, RejectsBadArguments) {
  EXPECT_THROW(learning_rate({config::Schedule::kConstant, 1e-3, 0}, -1), std::invalid_argument);
  EXPECT_THROW(learning_rate({config::Schedule::kInverseSqrt, 1e-3, 0}, 1), std::invalid_argument);
}

}  // namespace
}  // namespace tandem::optim
