// FlushedDenormals: inside its scope a denormal result is zero and a denormal input reads as zero;
// after it the thread computes them again; a thread running beside it keeps its own mode.
#include "trainer/kernels/cpu/denormals.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <thread>

namespace tandem::kernels {
namespace {

// Through volatile, so the compiler computes them at run time under the thread's mode.
float product(float a, float b) {
  volatile float x = a, y = b;
  return x * y;
}

// From its bits: a comparison or std::fpclassify in a flushed scope reads a denormal as zero.
bool is_denormal(float x) {
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return (bits & 0x7f800000U) == 0 && (bits & 0x007fffffU) != 0;
}

constexpr float kTiny = 1e-20F;                                       // a normal float
const float kDenormal = std::numeric_limits<float>::denorm_min() * 64;  // below 2^-126

#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__)
TEST(FlushedDenormals, FlushesResultsAndInputsInItsScopeAndRestoresTheModeAfter) {
  ASSERT_TRUE(is_denormal(product(kTiny, kTiny)));  // 1e-40
  ASSERT_EQ(product(kDenormal, 2.0F), kDenormal * 2);
  // A thread started before the scope computes in it: its mode is its own.
  std::promise<void> go;
  std::promise<float> elsewhere;
  std::thread other([&] {
    go.get_future().wait();
    elsewhere.set_value(product(kTiny, kTiny));
  });
  {
    const FlushedDenormals flushed;
    EXPECT_FALSE(is_denormal(product(kTiny, kTiny)));
    EXPECT_FALSE(is_denormal(product(kDenormal, 2.0F)));
    EXPECT_EQ(product(kTiny, kTiny), 0.0F);
    EXPECT_EQ(product(kDenormal, 2.0F), 0.0F);
    EXPECT_EQ(product(kTiny, 2.0F), 2e-20F);  // normal numbers as ever
    go.set_value();
    EXPECT_TRUE(is_denormal(elsewhere.get_future().get()));
    {
      const FlushedDenormals nested;
      EXPECT_FALSE(is_denormal(product(kTiny, kTiny)));
    }
    EXPECT_FALSE(is_denormal(product(kTiny, kTiny)));  // the outer scope's mode is back
  }
  other.join();
  EXPECT_TRUE(is_denormal(product(kTiny, kTiny)));
  EXPECT_EQ(product(kDenormal, 2.0F), kDenormal * 2);
}
#endif

}  // namespace
}  // namespace tandem::kernels
