// utc_now_iso8601 against the clock: its format, and the moment it names.
#include "trainer/common/timestamp.h"

#include <gtest/gtest.h>

#include <ctime>
#include <regex>

namespace tandem {
namespace {

TEST(Timestamp, NamesNowInUtcToTheSecond) {
  const std::time_t before = std::time(nullptr);
  const std::string text = utc_now_iso8601();
  const std::time_t after = std::time(nullptr);
  ASSERT_TRUE(std::regex_match(text, std::regex("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z")))
      << text;
  std::tm utc{};
  ASSERT_NE(strptime(text.c_str(), "%Y-%m-%dT%H:%M:%SZ", &utc), nullptr) << text;
  const std::time_t named = timegm(&utc);
  EXPECT_GE(named, before);
  EXPECT_LE(named, after);
}

}  // namespace
}  // namespace tandem
